"""MSDeformAttn (public parameter layout, PLuG gate, fused/eager/scripted) and the detection
scene generator."""
import numpy as np
import pytest
import torch

from gatescope.attention.ms_deform import ms_deform_attn_reference
from gatescope.attention.ms_deform_attn import (MSDeformAttn, level_start_index,
                                                ms_deform_attn_eager)
from gatescope.data import detection_scenes as ds

# The public Deformable-DETR MSDeformAttn (models/ops/modules/ms_deform_attn.py) parameters,
# for d_model C, n_heads M, n_levels L, n_points P.
def public_layout(c, m, l, p):
    return {"sampling_offsets.weight": (m * l * p * 2, c), "sampling_offsets.bias": (m * l * p * 2,),
            "attention_weights.weight": (m * l * p, c), "attention_weights.bias": (m * l * p,),
            "value_proj.weight": (c, c), "value_proj.bias": (c,),
            "output_proj.weight": (c, c), "output_proj.bias": (c,)}


def plug_layout(c, m, l):
    return {"plug_gate.weight": (m * l, c), "plug_gate.bias": (m * l,),
            "plug_gml.weight": (2, 1), "plug_gml.bias": (2,)}


LEVELS = [(7, 5), (4, 9), (2, 3)]  # non-square levels


def inputs(c=32, levels=LEVELS, n=2, lq=6, box=False, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    shapes = torch.tensor(levels, dtype=torch.long)
    s = int((shapes[:, 0] * shapes[:, 1]).sum())
    query = torch.randn(n, lq, c, generator=gen, dtype=dtype)
    flat = torch.randn(n, s, c, generator=gen, dtype=dtype)
    ref = torch.rand(n, lq, len(levels), 4 if box else 2, generator=gen, dtype=dtype)
    if box:
        ref[..., 2:] = ref[..., 2:] * 0.5 + 0.05
    return query, ref, flat, shapes, level_start_index(shapes)


def trained_like(module, seed=1):
    """Non-zero attention_weights and offset weights, as after training."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for lin in (module.attention_weights, module.sampling_offsets):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) * 0.2)
    return module


@pytest.mark.parametrize("c,m,l,p", [(256, 8, 4, 4), (32, 4, 3, 2)])
def test_parameter_layout(c, m, l, p):
    plain = MSDeformAttn(c, l, m, p)
    assert {k: tuple(v.shape) for k, v in plain.state_dict().items()} == public_layout(c, m, l, p)
    gated = MSDeformAttn(c, l, m, p, plug=True)
    want = dict(public_layout(c, m, l, p), **plug_layout(c, m, l))
    assert {k: tuple(v.shape) for k, v in gated.state_dict().items()} == want


def test_public_initialisation():
    mod = MSDeformAttn(256, 4, 8, 4, plug=True)
    assert (mod.sampling_offsets.weight == 0).all()
    assert (mod.attention_weights.weight == 0).all() and (mod.attention_weights.bias == 0).all()
    assert (mod.value_proj.bias == 0).all() and (mod.output_proj.bias == 0).all()
    grid = mod.sampling_offsets.bias.view(8, 4, 4, 2)
    # head 0 points along +x, head 2 along +y; point p at distance p + 1; same for all levels
    assert torch.allclose(grid[0, 0, :, 0], torch.tensor([1.0, 2, 3, 4]))
    assert torch.allclose(grid[0, 0, :, 1], torch.zeros(4), atol=1e-6)
    assert torch.allclose(grid[2, 0, :, 1], torch.tensor([1.0, 2, 3, 4]))
    assert torch.allclose(grid[1, 0, 0], torch.tensor([1.0, 1.0]))
    assert torch.equal(grid[:, 0], grid[:, 3])
    assert mod.plug_gml.weight.flatten().tolist() == [0.0, 0.0]
    assert mod.plug_gml.bias.tolist() == [0.0, 1.0]


@pytest.mark.parametrize("box", [False, True])
def test_plug_at_init_equals_plain_and_loads_plain_checkpoint(box):
    torch.manual_seed(0)
    plain = trained_like(MSDeformAttn(32, 3, 4, 2))
    gated = MSDeformAttn(32, 3, 4, 2, plug=True)
    result = gated.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(result.missing_keys) == sorted(plug_layout(32, 4, 3))
    assert result.unexpected_keys == []
    x = inputs(box=box)
    out_plain = plain(*x)
    out_gated, maps = gated.forward_with_maps(*x)
    assert torch.equal(out_plain, out_gated)
    assert (maps["plug_gate"] == 0).all() and maps["plug_gate"].shape == (2, 6, 4, 3)
    _, plain_maps = plain.forward_with_maps(*x)
    assert "plug_gate" not in plain_maps
    for key in ("sampling_locations", "attention_weights"):
        assert torch.equal(plain_maps[key], maps[key])


def test_maps_shapes_and_softmax():
    mod = trained_like(MSDeformAttn(32, 3, 4, 2, plug=True))
    x = inputs()
    out, maps = mod.forward_with_maps(*x)
    assert out.shape == (2, 6, 32)
    assert maps["sampling_locations"].shape == (2, 6, 4, 3, 2, 2)
    w = maps["attention_weights"]
    assert w.shape == (2, 6, 4, 3, 2)
    assert torch.allclose(w.sum((-1, -2)), torch.ones(2, 6, 4))
    assert torch.equal(out, mod(*x))
    # offsets are in pixels of each level: at init point p of head 0 sits (p + 1) / W_l right
    fresh = MSDeformAttn(32, 3, 4, 2)
    loc = fresh.forward_with_maps(*x)[1]["sampling_locations"]
    ref = x[1]
    for lid, (h, w_) in enumerate(LEVELS):
        assert torch.allclose(loc[:, :, 0, lid, 1, 0], ref[:, :, lid, 0] + 2.0 / w_)
        assert torch.allclose(loc[:, :, 0, lid, 1, 1], ref[:, :, lid, 1])


def test_gate_matches_paper_formula():
    mod = trained_like(MSDeformAttn(32, 3, 4, 2, plug=True))
    with torch.no_grad():
        mod.plug_gml.weight.copy_(torch.tensor([[0.7], [-0.4]]))
        mod.plug_gml.bias.copy_(torch.tensor([0.2, 0.9]))
    x = inputs()
    _, maps = mod.forward_with_maps(*x)
    q = x[0]
    r = mod.plug_gate(q).view(2, 6, 4, 3)
    g = (0.7 * r + 0.2) * (-0.4 * r + 0.9)
    assert torch.allclose(maps["plug_gate"], g, atol=1e-6)
    logits = mod.attention_weights(q).view(2, 6, 4, 3, 2) * (1 + g[..., None])
    want = logits.view(2, 6, 4, 6).softmax(-1).view(2, 6, 4, 3, 2)
    assert torch.allclose(maps["attention_weights"], want, atol=1e-6)


def test_gradients_reach_plug_gml():
    x = inputs()
    # From a plain checkpoint (attention_weights non-zero): at once.
    mod = trained_like(MSDeformAttn(32, 3, 4, 2, plug=True))
    mod(*x).pow(2).sum().backward()
    assert mod.plug_gml.weight.grad.abs().sum() > 0 and mod.plug_gml.bias.grad.abs().sum() > 0
    assert mod.plug_gate.weight.grad is not None
    assert mod.plug_gate.weight.grad.abs().sum() == 0  # dG/dr = wA gB + wB gA = 0 at init
    # Fresh public init: attention_weights are zero, so the gate's gradient is zero at the
    # first step and non-zero from the second.
    torch.manual_seed(0)
    fresh = MSDeformAttn(32, 3, 4, 2, plug=True)
    opt = torch.optim.SGD(fresh.parameters(), lr=0.1)
    target = torch.randn(2, 6, 32)
    (fresh(*x) - target).pow(2).sum().backward()
    assert fresh.plug_gml.weight.grad.abs().sum() == 0
    opt.step()
    opt.zero_grad()
    (fresh(*x) - target).pow(2).sum().backward()
    assert fresh.plug_gml.weight.grad.abs().sum() > 0
    assert fresh.plug_gml.bias.grad[0].abs() > 0


def test_eager_core_matches_reference():
    gen = torch.Generator().manual_seed(4)
    shapes = torch.tensor(LEVELS)
    s = int((shapes[:, 0] * shapes[:, 1]).sum())
    value = torch.randn(2, s, 3, 5, generator=gen, dtype=torch.float64)
    loc = torch.rand(2, 7, 3, 3, 4, 2, generator=gen, dtype=torch.float64) * 1.3 - 0.15
    w = torch.rand(2, 7, 3, 3, 4, generator=gen, dtype=torch.float64)
    assert torch.allclose(ms_deform_attn_eager(value, shapes, loc, w),
                          ms_deform_attn_reference(value, shapes, loc, w), atol=1e-12)


@pytest.mark.parametrize("plug", [False, True])
@pytest.mark.parametrize("box", [False, True])
def test_fused_equals_eager(ops, plug, box):
    torch.manual_seed(0)
    eager = trained_like(MSDeformAttn(32, 3, 4, 2, plug=plug))
    fused = MSDeformAttn(32, 3, 4, 2, plug=plug, use_fused=True)
    fused.load_state_dict(eager.state_dict())
    x = inputs(box=box, lq=11)
    mask = torch.zeros(2, x[2].shape[1], dtype=torch.bool)
    mask[1, -10:] = True
    with torch.no_grad():
        a = eager(*x, mask)
        b = fused(*x, mask)
        fa, fmaps = fused.forward_with_maps(*x, mask)
    assert (a - b).abs().max() < 1e-5
    assert torch.equal(fa, b)
    assert "plug_gate" in fmaps if plug else "plug_gate" not in fmaps
    # with gradients on, the fused module takes the eager path
    assert torch.equal(fused(*x, mask), eager(*x, mask))


@pytest.mark.parametrize("plug", [False, True])
def test_scripted_equals_eager(ops, plug):
    torch.manual_seed(0)
    for use_fused in (False, True):
        mod = trained_like(MSDeformAttn(32, 3, 4, 2, plug=plug, use_fused=use_fused))
        scripted = torch.jit.script(mod)
        for box in (False, True):
            x = inputs(box=box)
            with torch.no_grad():
                assert torch.allclose(scripted(*x), mod(*x), atol=1e-6)
                out, maps = scripted.forward_with_maps(*x)
                want, want_maps = mod.forward_with_maps(*x)
            assert torch.allclose(out, want, atol=1e-6)
            assert sorted(maps) == sorted(want_maps)
            for k in maps:
                assert torch.allclose(maps[k], want_maps[k], atol=1e-6)
    # gradients flow through the scripted eager path
    scripted = torch.jit.script(trained_like(MSDeformAttn(32, 3, 4, 2, plug=plug)))
    scripted(*inputs()).sum().backward()
    assert scripted.value_proj.weight.grad.abs().sum() > 0


def test_padding_mask_zeroes_values():
    mod = trained_like(MSDeformAttn(32, 3, 4, 2))
    q, ref, flat, shapes, starts = inputs()
    mask = torch.zeros(2, flat.shape[1], dtype=torch.bool)
    mask[0, 5:20] = True
    changed = flat.clone()
    changed[0, 5:20] += 100.0
    assert torch.allclose(mod(q, ref, flat, shapes, starts, mask),
                          mod(q, ref, changed, shapes, starts, mask), atol=1e-5)


# ---------------------------------------------------------------- detection scenes

FASHION = ("fashion",)
needs_mnist = pytest.mark.skipif(not ds.mnist_available(),
                                 reason=f"MNIST not in {ds.mnist_dir()} (see detection_scenes)")


def sources_available():
    return ds.SOURCES if ds.mnist_available() else FASHION


def test_scenes_deterministic_and_prefix_stable():
    src = sources_available()
    a = ds.make_scenes("train", 6, seed=3, sources=src)
    b = ds.make_scenes("train", 6, seed=3, sources=src)
    c = ds.make_scenes("train", 3, seed=3, sources=src)
    d = ds.make_scenes("train", 3, seed=4, sources=src)
    e = ds.make_scenes("train", 3, seed=3, sources=src, start=3)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            assert np.array_equal(u, v)
    for x, y in zip(a[:3], c):
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
    for x, y in zip(a[3:], e):
        assert np.array_equal(x[0], y[0])
    assert any(x[0].shape != y[0].shape or not np.array_equal(x[0], y[0]) for x, y in zip(c, d))


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_scene_boxes_tight_inside_and_labels(split):
    src = sources_available()
    scenes = ds.make_scenes(split, 40, seed=0, sources=src)
    counts = set()
    for img, boxes, labels in scenes:
        assert img.dtype == np.uint8 and boxes.dtype == np.float32 and labels.dtype == np.int64
        h, w = img.shape
        assert 64 <= h <= 128 and 64 <= w <= 128
        assert 1 <= len(boxes) <= 4 and boxes.shape == (len(labels), 4)
        counts.add(len(boxes))
        covered = np.zeros_like(img, dtype=bool)
        for (x1, y1, x2, y2), lab in zip(boxes.astype(int), labels):
            assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
            crop = img[y1:y2, x1:x2] > 0
            # tight: every edge row and column of the box holds a nonzero pixel
            assert crop[0].any() and crop[-1].any() and crop[:, 0].any() and crop[:, -1].any()
            assert not covered[y1:y2, x1:x2].any()  # objects do not overlap
            covered[y1:y2, x1:x2] = True
            assert 0 <= lab < ds.NUM_CLASSES
            if "mnist" not in src:
                assert lab < 10
        assert not (img[~covered] > 0).any()  # nothing outside the boxes
    assert len(counts) >= 3


def test_non_square_and_size_range():
    scenes = ds.make_scenes("train", 20, seed=1, size_range=(60, 90), sources=FASHION)
    shapes = [s[0].shape for s in scenes]
    assert all(60 <= h <= 90 and 60 <= w <= 90 for h, w in shapes)
    assert any(h != w for h, w in shapes)


def _crop_keys(images):
    keys = set()
    for im in images:
        m = im > 0
        rows, cols = np.flatnonzero(m.any(1)), np.flatnonzero(m.any(0))
        if rows.size:
            keys.add(im[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].tobytes())
    return keys


def test_objects_come_from_their_split_images():
    # at scale 1 the object is exactly the tight crop of its source image
    train = _crop_keys(ds.load_source("fashion", "train")[0])
    test = _crop_keys(ds.load_source("fashion", "heldout")[0])
    for split, own in (("heldout", test), ("train", train)):
        for img, boxes, _ in ds.make_scenes(split, 15, seed=5, sources=FASHION,
                                            scale_range=(1.0, 1.0)):
            for x1, y1, x2, y2 in boxes.astype(int):
                key = img[y1:y2, x1:x2].tobytes()
                assert key in own


def test_train_and_heldout_draw_from_their_own_splits():
    # the generator asks only for its own split of each source
    src = sources_available()
    train_imgs = {s: ds.load_source(s, "train") for s in src}
    test_imgs = {s: ds.load_source(s, "heldout") for s in src}
    for s in src:
        assert train_imgs[s][0].shape[0] == 60000 and test_imgs[s][0].shape[0] == 10000
    assert ds.load_source("fashion", "test")[0] is test_imgs["fashion"][0]
    seen = {"train": [], "heldout": []}
    original = ds.load_source

    def spy(source, split):
        seen[ds._split_name(split)].append(source)
        return original(source, split)

    ds.load_source = spy
    try:
        ds.make_scenes("heldout", 3, seed=0, sources=src)
        assert seen["train"] == [] and set(seen["heldout"]) == set(src)
        ds.make_scenes("train", 3, seed=0, sources=src)
        assert set(seen["train"]) == set(src)
    finally:
        ds.load_source = original
    # the same seed gives different scenes in the two splits
    a, b = ds.make_scenes("train", 1, 0, sources=src)[0], ds.make_scenes("heldout", 1, 0,
                                                                       sources=src)[0]
    assert a[0].shape != b[0].shape or not np.array_equal(a[0], b[0])


@needs_mnist
def test_mnist_labels_present():
    scenes = ds.make_scenes("heldout", 40, seed=2)
    labels = np.concatenate([s[2] for s in scenes])
    assert (labels >= 10).any() and (labels < 10).any() and labels.max() < 20
    assert ds.load_source("mnist", "heldout")[1].min() == 10


def test_collate_scenes():
    scenes = ds.make_scenes("train", 3, seed=0, sources=FASHION)
    batch = ds.collate_scenes(scenes)
    assert batch["images"].shape == (3, 1, 128, 128)
    for i, (img, boxes, labels) in enumerate(scenes):
        h, w = img.shape
        assert batch["sizes"][i].tolist() == [h, w]
        assert not batch["mask"][i, :h, :w].any() and batch["mask"][i].sum() == 128 * 128 - h * w
        assert torch.allclose(batch["images"][i, 0, :h, :w] * 255, torch.from_numpy(img).float())
        t = batch["targets"][i]
        assert torch.equal(t["labels"], torch.from_numpy(labels))
        cx = (t["boxes"][:, 0] + t["boxes"][:, 2]) / 2 / w
        assert torch.allclose(t["boxes_cxcywh"][:, 0], cx)
        assert ((t["boxes_cxcywh"] > 0) & (t["boxes_cxcywh"] <= 1)).all()
    tight = ds.collate_scenes(scenes, canvas=None)
    assert tight["images"].shape[2:] == (max(s[0].shape[0] for s in scenes),
                                         max(s[0].shape[1] for s in scenes))
