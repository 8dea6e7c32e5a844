"""gatescope::dgsa_attention (CPU) against the eager M-DGSA reference."""
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
