"""gatescope::dgsa_attention (CPU) against the eager M-DGSA reference, with and without a
key padding mask."""
import pytest
import torch

from baseline_isa import printed_without_avx2
from gatescope.attention.dgsa import dgsa_reference


def make_inputs(b, h, nq, nk, d, dv, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype)  # noqa: E731
    return (r(b, h, nq, d), r(b, h, nk, d), r(b, h, nq, d), r(b, h, nk, d), r(b, h, nk, dv),
            torch.rand(b, h, nq, generator=g, dtype=torch.float64).to(dtype))


SHAPES = [
    (1, 1, 1, 1, 8, 16),       # single token
    (2, 4, 17, 17, 8, 16),     # odd N, batch > 1 (DGViT patch-7 grid + class token)
    (3, 2, 63, 63, 16, 32),    # one short of a key block
    (1, 3, 65, 65, 16, 16),    # one past a key block
    (2, 2, 197, 197, 32, 64),  # ViT-B/16 sequence length
    (1, 2, 50, 130, 8, 8),     # cross attention, Nk not a multiple of the block
]


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_reference_float32(ops, shape):
    args = make_inputs(*shape)
    out = ops.dgsa_attention(*args)
    ref = dgsa_reference(*[a.double() for a in args]).float()
    assert out.shape == ref.shape
    assert torch.allclose(out, ref, atol=1e-5, rtol=0), (out - ref).abs().max()


@pytest.mark.parametrize("shape", SHAPES[:4])
def test_matches_reference_float64(ops, shape):
    args = make_inputs(*shape, dtype=torch.float64, seed=1)
    out = ops.dgsa_attention(*args)
    assert out.dtype == torch.float64
    assert torch.allclose(out, dgsa_reference(*args), atol=1e-10, rtol=0)


def test_large_logits_are_stable(ops):
    qp, kp, qn, kn, v, gate = make_inputs(1, 2, 40, 40, 8, 8, seed=2)
    args = (qp * 30, kp * 30, qn * 30, kn * 30, v, gate)
    out = ops.dgsa_attention(*args)
    assert torch.isfinite(out).all()
    assert torch.allclose(out, dgsa_reference(*[a.double() for a in args]).float(), atol=1e-5)


def test_gate_extremes_select_branches(ops):
    qp, kp, qn, kn, v, _ = make_inputs(1, 1, 9, 9, 4, 4, seed=3)
    ones, zeros = torch.ones(1, 1, 9), torch.zeros(1, 1, 9)
    pos_only = torch.softmax(qp @ kp.transpose(-1, -2) / 2.0, -1) @ v
    neg_only = torch.softmax(qn @ kn.transpose(-1, -2) / 2.0, -1) @ v
    assert torch.allclose(ops.dgsa_attention(qp, kp, qn, kn, v, ones), pos_only, atol=1e-5)
    assert torch.allclose(ops.dgsa_attention(qp, kp, qn, kn, v, zeros), -neg_only, atol=1e-5)


def test_non_contiguous_inputs(ops):
    args = make_inputs(2, 3, 20, 20, 8, 8, seed=4)
    t = [a.transpose(1, 2).contiguous().transpose(1, 2) for a in args[:5]] + [args[5]]
    assert not t[0].is_contiguous()
    assert torch.allclose(ops.dgsa_attention(*t), dgsa_reference(*args), atol=1e-5)


@pytest.mark.parametrize("bad", ["gate_shape", "v_rows", "dtype", "rank"])
def test_rejects_bad_arguments(ops, bad):
    qp, kp, qn, kn, v, gate = make_inputs(1, 2, 5, 5, 4, 4)
    if bad == "gate_shape":
        gate = gate[..., :4]
    elif bad == "v_rows":
        v = v[:, :, :3]
    elif bad == "dtype":
        v = v.double()
    else:
        qp = qp[0]
    with pytest.raises(RuntimeError, match="dgsa_attention"):
        ops.dgsa_attention(qp, kp, qn, kn, v, gate)


def test_baseline_isa_path_matches_reference(ops):
    """The non-AVX2 build of the float kernel, forced through GATESCOPE_DISABLE_AVX2."""
    out = printed_without_avx2(
        "from test_dgsa_op import make_inputs\n"
        "from gatescope.attention.dgsa import dgsa_reference\n"
        "worst = 0.0\n"
        "for shape in [(2, 4, 17, 17, 8, 16), (1, 3, 65, 65, 16, 32), (1, 2, 50, 130, 12, 20)]:\n"
        "    a = make_inputs(*shape)\n"
        "    ref = dgsa_reference(*[t.double() for t in a]).float()\n"
        "    worst = max(worst, float((torch.ops.gatescope.dgsa_attention(*a) - ref).abs().max()))\n"
        "print(worst)\n")
    assert float(out.strip()) < 1e-5


# --- key_padding_mask: [B, Nk], bool or uint8, nonzero = visible key --------------------

MASKED_SHAPES = [
    (4, 2, 17, 17, 8, 16),     # specialised d=8, dv=16
    (4, 2, 70, 70, 16, 32),    # specialised d=16, dv=32; tail key block partly padded
    (3, 2, 130, 130, 32, 64),  # specialised d=32, dv=64; whole key blocks of padding
    (4, 3, 50, 90, 12, 20),    # generic kernel, cross attention
]


def make_mask(b, nk, seed=0):
    """Mixed visibility per batch row: 0 all visible, 1 none (fully masked), 2 a padded
    prefix, later rows random (at least one key visible)."""
    g = torch.Generator().manual_seed(100 + seed)
    mask = torch.rand(b, nk, generator=g) > 0.5
    mask[0] = True
    if b > 1:
        mask[1] = False
    if b > 2:
        mask[2] = torch.arange(nk) < max(1, nk // 3)
    mask[3:, 0] = True
    return mask


def as_mask_dtype(mask, mask_dtype):
    if mask_dtype == torch.bool:
        return mask
    # Any nonzero byte is visible, not only 1.
    return mask.to(torch.uint8) * torch.randint(1, 256, mask.shape, dtype=torch.uint8,
                                                generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize("shape", MASKED_SHAPES)
@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.uint8])
def test_masked_matches_reference_float32(ops, shape, mask_dtype):
    args = make_inputs(*shape, seed=5)
    mask = as_mask_dtype(make_mask(shape[0], shape[3]), mask_dtype)
    out = ops.dgsa_attention(*args, mask)
    ref = dgsa_reference(*[a.double() for a in args], mask).float()
    assert out.shape == ref.shape
    assert torch.isfinite(out).all()
    assert torch.allclose(out, ref, atol=1e-5, rtol=0), (out - ref).abs().max()
    assert torch.equal(out[1], torch.zeros_like(out[1]))  # batch row 1 sees no key


@pytest.mark.parametrize("shape", MASKED_SHAPES)
@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.uint8])
def test_masked_matches_reference_float64(ops, shape, mask_dtype):
    args = make_inputs(*shape, dtype=torch.float64, seed=6)
    mask = as_mask_dtype(make_mask(shape[0], shape[3], seed=1), mask_dtype)
    out = ops.dgsa_attention(*args, key_padding_mask=mask)
    assert out.dtype == torch.float64
    ref = dgsa_reference(*args, key_padding_mask=mask)
    assert torch.allclose(out, ref, atol=1e-10, rtol=0), (out - ref).abs().max()
    assert torch.equal(out[1], torch.zeros_like(out[1]))


def test_reference_masked_maps():
    """The eager reference itself: hidden keys get weight 0, visible rows sum to 1 per
    branch, blind rows are 0 (no NaN), and it compiles with TorchScript."""
    from gatescope.attention.dgsa import dgsa_reference_maps
    args = make_inputs(3, 2, 9, 11, 4, 4, dtype=torch.float64, seed=8)
    mask = make_mask(3, 11)
    out, fused, gate = dgsa_reference_maps(*args, mask)
    assert torch.isfinite(out).all() and torch.isfinite(fused).all()
    hidden = ~mask[:, None, None, :].expand_as(fused)
    assert torch.equal(fused[hidden], torch.zeros_like(fused[hidden]))
    assert torch.equal(fused[1], torch.zeros_like(fused[1]))
    # Rows of A = g A+ - (1 - g) A- sum to g - (1 - g) where some key is visible.
    g = gate[[0, 2]]
    assert torch.allclose(fused[[0, 2]].sum(-1), 2 * g - 1, atol=1e-12)
    scripted = torch.jit.script(dgsa_reference)
    assert torch.equal(scripted(*args, mask), dgsa_reference(*args, mask))
    assert torch.equal(scripted(*args), dgsa_reference(*args))


@pytest.mark.parametrize("shape", MASKED_SHAPES + [(2, 2, 33, 33, 64, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_all_visible_mask_equals_no_mask(ops, shape, dtype):
    args = make_inputs(*shape, dtype=dtype, seed=9)
    plain = ops.dgsa_attention(*args)
    for mask in (torch.ones(shape[0], shape[3], dtype=torch.bool),
                 torch.full((shape[0], shape[3]), 3, dtype=torch.uint8)):
        assert torch.equal(ops.dgsa_attention(*args, mask), plain)
    assert torch.equal(ops.dgsa_attention(*args, None), plain)


@pytest.mark.parametrize("d,dv", [(16, 32), (8, 16), (32, 64), (12, 20)])
def test_padded_batch_matches_each_example_alone(ops, d, dv):
    """What the server relies on: a batch padded to the longest example (mask = the real
    tokens) gives each example's real rows the result of running it alone, unpadded."""
    lengths = [128, 5, 64, 100, 1, 65, 17]
    n, h = max(lengths), 2
    args = make_inputs(len(lengths), h, n, n, d, dv, seed=10)
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    batched = ops.dgsa_attention(*args, mask)
    assert torch.isfinite(batched).all()
    for i, length in enumerate(lengths):
        alone = [a[i:i + 1, :, :length].contiguous() for a in args]
        single = ops.dgsa_attention(*alone)
        assert torch.allclose(batched[i:i + 1, :, :length], single, atol=1e-5, rtol=0), \
            (i, (batched[i:i + 1, :, :length] - single).abs().max())


def test_masked_half_and_strided_mask(ops):
    args = make_inputs(3, 2, 40, 40, 16, 32, seed=11)
    wide = make_mask(3, 80)
    mask = wide[:, ::2]  # non-contiguous
    assert not mask.is_contiguous()
    ref = dgsa_reference(*[a.double() for a in args], mask)
    assert torch.allclose(ops.dgsa_attention(*args, mask), ref.float(), atol=1e-5, rtol=0)
    half = [a.half() for a in args]
    out16 = ops.dgsa_attention(*half, mask)
    assert out16.dtype == torch.float16
    ref16 = dgsa_reference(*[a.double() for a in half], mask)
    assert torch.allclose(out16.double(), ref16, atol=2e-3)


@pytest.mark.parametrize("bad", ["short", "long", "batch", "rank", "float"])
def test_rejects_bad_masks(ops, bad):
    b, nk = 2, 5
    args = make_inputs(b, 2, 5, nk, 4, 4)
    mask = {
        "short": torch.ones(b, nk - 1, dtype=torch.bool),
        "long": torch.ones(b, nk + 1, dtype=torch.bool),
        "batch": torch.ones(b + 1, nk, dtype=torch.bool),
        "rank": torch.ones(b, 1, nk, dtype=torch.bool),
        "float": torch.ones(b, nk),
    }[bad]
    with pytest.raises(RuntimeError, match="key_padding_mask"):
        ops.dgsa_attention(*args, mask)


def test_six_argument_call_still_works(ops):
    """Old callers (the shipped TorchScript archives) pass no mask: the schema default."""
    schema = str(torch.ops.gatescope.dgsa_attention.default._schema)
    assert schema.endswith("Tensor gate, Tensor? key_padding_mask=None) -> Tensor"), schema
    args = make_inputs(2, 2, 17, 17, 8, 16, seed=12)

    @torch.jit.script
    def six(qp, kp, qn, kn, v, g):
        return torch.ops.gatescope.dgsa_attention(qp, kp, qn, kn, v, g)

    @torch.jit.script
    def seven(qp, kp, qn, kn, v, g, m: torch.Tensor):
        return torch.ops.gatescope.dgsa_attention(qp, kp, qn, kn, v, g, key_padding_mask=m)

    plain = ops.dgsa_attention(*args)
    assert torch.equal(six(*args), plain)
    mask = make_mask(2, 17)
    assert torch.equal(seven(*args, mask), ops.dgsa_attention(*args, mask))


def test_baseline_isa_path_masked(ops):
    """The non-AVX2 build of the float kernel with a mask."""
    out = printed_without_avx2(
        "from test_dgsa_op import make_inputs, make_mask\n"
        "from gatescope.attention.dgsa import dgsa_reference\n"
        "worst = 0.0\n"
        "for shape in [(4, 2, 17, 17, 8, 16), (3, 2, 130, 130, 32, 64), (4, 2, 50, 90, 12, 20)]:\n"
        "    a = make_inputs(*shape)\n"
        "    m = make_mask(shape[0], shape[3])\n"
        "    ref = dgsa_reference(*[t.double() for t in a], m).float()\n"
        "    out = torch.ops.gatescope.dgsa_attention(*a, m)\n"
        "    assert torch.isfinite(out).all()\n"
        "    worst = max(worst, float((out - ref).abs().max()))\n"
        "print(worst)\n")
    assert float(out.strip()) < 1e-5
