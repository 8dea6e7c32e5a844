import itertools

import numpy as np
import pytest
import torch

from gatescope.detection_loss import (SetCriterion, average_precision, linear_sum_assignment)
from gatescope.detection import decode
from gatescope.networks.deformable_detr import DeformableDETR

SMALL = dict(num_classes=20, d_model=64, n_heads=8, n_points=4, enc_layers=2, dec_layers=2,
             d_ffn=128, num_queries=30)


def model(plug=False, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(SMALL)
    cfg.update(kw)
    return DeformableDETR(plug=plug, **cfg).eval()


def perturb(m, seed=1, scale=0.05):
    """Move every parameter (so the zero-initialised ones, gates included, matter)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return m


def batch(h, w, b=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, 1, h, w, generator=g)
    mask = torch.zeros(b, h, w, dtype=torch.bool)
    mask[1, h - h // 4:, :] = True
    mask[1, :, w - w // 3:] = True
    x = x.masked_fill(mask[:, None], 0.0)
    return x, mask


MSDA = ["sampling_offsets.weight", "sampling_offsets.bias", "attention_weights.weight",
        "attention_weights.bias", "value_proj.weight", "value_proj.bias",
        "output_proj.weight", "output_proj.bias"]


def test_state_dict_names():
    m = model()
    sd = m.state_dict()
    d = 64
    want = {"transformer.level_embed": (4, d), "transformer.reference_points.weight": (2, d),
            "transformer.reference_points.bias": (2,), "query_embed.weight": (30, 2 * d),
            "class_embed.weight": (20, d), "class_embed.bias": (20,)}
    for i in range(3):
        want[f"bbox_embed.layers.{i}.weight"] = (4 if i == 2 else d, d)
    for lvl in range(4):
        want[f"input_proj.{lvl}.0.bias"] = (d,)
        want[f"input_proj.{lvl}.1.weight"] = (d,)
        want[f"input_proj.{lvl}.1.bias"] = (d,)
    assert sd["input_proj.3.0.weight"].shape[-2:] == (3, 3)
    for i in range(2):
        e = f"transformer.encoder.layers.{i}."
        for n in MSDA:
            assert e + "self_attn." + n in sd
        for n in ("norm1", "linear1", "linear2", "norm2"):
            assert e + n + ".weight" in sd and e + n + ".bias" in sd
        dd = f"transformer.decoder.layers.{i}."
        for n in MSDA:
            assert dd + "cross_attn." + n in sd
        for n in ("self_attn.in_proj_weight", "self_attn.in_proj_bias",
                  "self_attn.out_proj.weight", "self_attn.out_proj.bias"):
            assert dd + n in sd
        for n in ("norm1", "norm2", "norm3", "linear1", "linear2"):
            assert dd + n + ".weight" in sd and dd + n + ".bias" in sd
        want[e + "self_attn.sampling_offsets.weight"] = (8 * 4 * 4 * 2, d)
        want[dd + "cross_attn.attention_weights.weight"] = (8 * 4 * 4, d)
    for k, shape in want.items():
        assert tuple(sd[k].shape) == shape, k
    non_backbone = [k for k in sd if not k.startswith("backbone.")]
    assert not any("plug" in k for k in sd)
    assert len(non_backbone) > 100
    # PLuG parameters only in encoder self-attention and decoder cross-attention
    plug_keys = [k for k in model(plug=True).state_dict() if "plug" in k]
    assert len(plug_keys) == 4 * 4
    assert all(".self_attn.plug" in k and "encoder" in k or
               ".cross_attn.plug" in k and "decoder" in k for k in plug_keys)


def test_plug_loads_plain_checkpoint_and_matches():
    plain = perturb(model(plug=False))
    plug = model(plug=True, seed=5)
    res = plug.load_state_dict(plain.state_dict(), strict=False)
    assert res.unexpected_keys == []
    assert res.missing_keys and all(".plug_" in k for k in res.missing_keys)
    x, mask = batch(96, 128)
    with torch.no_grad():
        a, b = plain(x, mask), plug(x, mask)
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k


@pytest.mark.parametrize("plug", [False, True])
def test_scripted_equals_eager_two_sizes(plug):
    m = perturb(model(plug=plug))
    s = torch.jit.script(m)
    for h, w in ((96, 128), (128, 128)):
        x, mask = batch(h, w)
        with torch.no_grad():
            for mk in (None, mask):
                want, got = m(x, mk), s(x, mk)
                assert got["logits"].shape == (2, 30, 20) and got["boxes"].shape == (2, 30, 4)
                for k in want:
                    assert torch.allclose(want[k], got[k], atol=1e-5), (h, w, k)
            ex, exs = m.explain(x, mask), s.explain(x, mask)
        assert sorted(ex) == sorted(exs)
        for k in ex:
            for u, v in zip(ex[k], exs[k]):
                assert torch.allclose(u.double(), v.double(), atol=1e-5), k
        assert torch.allclose(ex["logits"][0], want["logits"], atol=1e-5)
        assert len(ex["decoder_sampling_locations"]) == 2
        assert ex["decoder_sampling_locations"][0].shape == (2, 30, 8, 4, 4, 2)
        assert ex["decoder_attention_weights"][1].shape == (2, 30, 8, 4, 4)
        assert torch.allclose(ex["decoder_attention_weights"][0].sum((-1, -2)),
                              torch.ones(2, 30, 8), atol=1e-5)
        shapes = ex["spatial_shapes"][0].tolist()
        assert shapes == [[-(-h // s_), -(-w // s_)] for s_ in (8, 16, 32, 64)]
        if plug:
            assert ex["decoder_plug_gate"][0].shape == (2, 30, 8, 4)
            s_total = sum(a * b for a, b in shapes)
            assert ex["encoder_plug_gate"][1].shape == (2, s_total, 8, 4)
        else:
            assert "decoder_plug_gate" not in ex and "encoder_plug_gate" not in ex


def test_served_plug_scale_is_one_plus_the_mean_gate_of_each_layer(ops):
    """forward()'s plug_scale_mean (served as gatescope_plug_scale_mean): per layer, 1 + the
    mean of the explain map G, over the image's own tokens only for encoder layers (padding
    left out) and over every query for decoder layers; scripted alike; none without PLuG."""
    m = perturb(model(plug=True))
    x, mask = batch(96, 128)
    with torch.no_grad():
        out, scripted = m(x, mask), torch.jit.script(m)(x, mask)
        ex = m.explain(x, mask)
        plain = model(plug=False)(x, mask)
        padded = m._prepare(x, mask)[2]  # [B, S], True on padding
    valid = (~padded).float()
    want = [1.0 + (g.mean(dim=(2, 3)) * valid).sum(1) / valid.sum(1)
            for g in ex["encoder_plug_gate"]]
    want += [1.0 + g.mean(dim=(1, 2, 3)) for g in ex["decoder_plug_gate"]]
    want = torch.stack(want, 1)
    assert out["plug_scale_mean"].shape == (2, 4)
    assert torch.allclose(out["plug_scale_mean"], want, atol=1e-5)
    assert torch.allclose(scripted["plug_scale_mean"], want, atol=1e-5)
    # The padded example's encoder statistic differs from the mean over all its tokens.
    unmasked = 1.0 + ex["encoder_plug_gate"][0][1].mean()
    assert abs(float(unmasked - want[1, 0])) > 1e-6
    assert "plug_scale_mean" not in plain


@pytest.mark.parametrize("plug", [False, True])
def test_fused_equals_eager(ops, plug):
    m = perturb(model(plug=plug))
    f = model(plug=plug)
    f.load_state_dict(m.state_dict())
    f.set_fused(True)
    x, mask = batch(96, 128)
    with torch.no_grad():
        a, b = m(x, mask), f(x, mask)
        sb = torch.jit.script(f)(x, mask)
    for k in a:
        assert (a[k] - b[k]).abs().max() < 1e-4, k
        assert (a[k] - sb[k]).abs().max() < 1e-4, k


def brute_force(c):
    n, m = c.shape
    if n <= m:
        return min(c[range(n), list(p)].sum() for p in itertools.permutations(range(m), n))
    return brute_force(c.T)


def test_assignment_exact():
    rng = np.random.default_rng(0)
    for trial in range(60):
        n, m = int(rng.integers(1, 5)), int(rng.integers(1, 7))
        c = rng.normal(size=(n, m))
        if trial % 3 == 0:
            c = np.round(c)  # ties
        r, col = linear_sum_assignment(c)
        assert len(r) == min(n, m)
        assert len(set(r.tolist())) == len(r) and len(set(col.tolist())) == len(col)
        assert abs(c[r, col].sum() - brute_force(c)) < 1e-9
    # queries x targets (50 x 4): an optimum only uses each target's 4 cheapest queries
    # (if target j took another, one of its 4 cheapest is free and no worse), so brute force
    # over the union of those is exact
    for _ in range(3):
        c = rng.random((50, 4))
        r, col = linear_sum_assignment(c)
        assert sorted(col.tolist()) == [0, 1, 2, 3]
        keep = sorted(set(np.argsort(c, 0)[:4].reshape(-1).tolist()))
        assert abs(c[r, col].sum() - brute_force(c[keep])) < 1e-9


def test_average_precision():
    g = torch.Generator().manual_seed(0)
    targets, perfect, shifted = [], [], []
    for i in range(5):
        k = 3
        xy = torch.rand(k, 2, generator=g) * 80
        wh = 10 + torch.rand(k, 2, generator=g) * 30
        boxes = torch.cat([xy, xy + wh], 1)
        labels = torch.tensor([i % 3, 5, 7])
        targets.append({"boxes": boxes, "labels": labels})
        scores = torch.rand(k, generator=g) * 0.5 + 0.5
        perfect.append({"boxes": boxes.clone(), "scores": scores, "labels": labels})
        shifted.append({"boxes": boxes + torch.tensor([4.0, 0.0, 4.0, 0.0]),
                        "scores": scores, "labels": labels})
    ap = average_precision(perfect, targets)
    assert ap["AP"] == pytest.approx(1.0) and ap["AP50"] == pytest.approx(1.0)
    assert ap["AP75"] == pytest.approx(1.0)
    sh = average_precision(shifted, targets)
    assert sh["AP"] < 0.9 and sh["AP"] < ap["AP"]
    assert sh["AP50"] >= sh["AP75"] >= 0.0
    # wrong labels -> zero; an extra low-score false positive keeps AP 1 (ranked last)
    wrong = [dict(p, labels=(p["labels"] + 1) % 20 + 10) for p in perfect]
    assert average_precision(wrong, targets)["AP"] == 0.0
    extra = [{"boxes": torch.cat([p["boxes"], torch.tensor([[0.0, 0.0, 5.0, 5.0]])]),
              "scores": torch.cat([p["scores"], torch.tensor([0.01])]),
              "labels": torch.cat([p["labels"], torch.tensor([5])])} for p in perfect]
    assert average_precision(extra, targets)["AP"] == pytest.approx(1.0)


def test_decode():
    logits = torch.full((1, 3, 4), -10.0)
    logits[0, 1, 2] = 5.0
    logits[0, 0, 3] = 1.0
    boxes = torch.tensor([[[0.5, 0.5, 0.2, 0.2], [0.25, 0.5, 0.5, 1.0], [0.1, 0.1, 0.1, 0.1]]])
    out = decode(logits[0], boxes[0], 100, 200, score_threshold=0.5, max_detections=5)
    assert out["labels"].tolist() == [2, 3]
    assert out["queries"].tolist() == [1, 0]
    assert decode(logits[0], boxes[0], 100, 200, 0.5, max_detections=1)["labels"].tolist() == [2]
    assert torch.allclose(out["boxes"][0], torch.tensor([0.0, 0.0, 100.0, 100.0]))
    assert torch.allclose(out["boxes"][1], torch.tensor([80.0, 40.0, 120.0, 60.0]))
    assert out["scores"][0] > out["scores"][1]


def test_training_step_reduces_loss():
    from gatescope.data import detection_scenes as ds
    sources = ds.SOURCES if ds.mnist_available() else ("fashion",)
    scenes = ds.make_scenes("train", 2, seed=0, sources=sources)
    b = ds.collate_scenes(scenes, canvas=(128, 128))
    torch.manual_seed(0)
    m = DeformableDETR(plug=True, dropout=0.0, **SMALL)
    crit = SetCriterion(20)
    opt = torch.optim.AdamW(m.parameters(), lr=2e-4)
    losses = []
    for _ in range(3):
        out = m(b["images"], b["mask"])
        loss = crit(out, b["targets"])["loss"]
        losses.append(float(loss))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert np.isfinite(losses).all()
    assert losses[-1] < losses[0]
