"""gatescope::gdla_attention (CPU) against the eager GDLA reference."""
import pytest
import torch

from baseline_isa import printed_without_avx2
from gatescope.attention.gdla import GATE_KINDS, gdla_reference
from op_errors import scaled_error

SHAPES = [
    (1, 1, 1, 8),      # single token
    (2, 2, 49, 16),    # 7x7 grid, batch > 1
    (1, 5, 197, 32),   # ViT-B/16 sequence length, odd head count
    (2, 1, 3136, 64),  # 224^2 input at stride 4: several summary chunks
    (1, 2, 130, 32),   # not a multiple of the row block (32) or the key group (8)
]
GATES = sorted(GATE_KINDS.values())


def make_inputs(b, h, n, dim, dtype=torch.float32, seed=0, weight=True):
    """q, k, v, g [B, H, N, D], lam [H, D] and norm_weight [D] (or None)."""
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    q, k, v, g = (r(b, h, n, dim).to(dtype) for _ in range(4))
    lam = (0.3 + 0.5 * r(h, dim)).to(dtype)
    w = (1.0 + 0.2 * r(dim)).to(dtype) if weight else None
    return q, k, v, g, lam, w


def reference64(q, k, v, g, lam, w, eps=1e-5, gate=0):
    """The eager reference in float64 on the given (possibly rounded) values."""
    return gdla_reference(q.double(), k.double(), v.double(), g.double(), lam.double(),
                          None if w is None else w.double(), eps, gate)



@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("weight", [True, False])
def test_matches_reference_float32(ops, shape, gate, weight):
    q, k, v, g, lam, w = make_inputs(*shape, weight=weight)
    out = ops.gdla_attention(q, k, v, g, lam, w, 1e-5, gate)
    assert out.shape == q.shape and out.dtype == torch.float32
    assert scaled_error(out, reference64(q, k, v, g, lam, w, 1e-5, gate)) < 1e-5


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_reference_float64(ops, shape):
    q, k, v, g, lam, w = make_inputs(*shape, dtype=torch.float64, seed=1)
    for gate in GATES:
        out = ops.gdla_attention(q, k, v, g, lam, w, 1e-5, gate)
        assert out.dtype == torch.float64
        ref = gdla_reference(q, k, v, g, lam, w, 1e-5, gate)
        assert torch.allclose(out, ref, atol=1e-10, rtol=1e-10), (out - ref).abs().max()


@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[3], SHAPES[4]])
@pytest.mark.parametrize("gate", GATES)
def test_matches_reference_float16(ops, shape, gate):
    q, k, v, g, lam, w = make_inputs(*shape, dtype=torch.float16, seed=2)
    out = ops.gdla_attention(q, k, v, g, lam, w, 1e-5, gate)
    assert out.dtype == torch.float16
    # The reference sees the same half-rounded values; the output is rounded to half.
    assert scaled_error(out, reference64(q, k, v, g, lam, w, 1e-5, gate)) < 2e-3


def test_defaults_and_eps(ops):
    q, k, v, g, lam, _ = make_inputs(2, 2, 40, 16, seed=3)
    out = ops.gdla_attention(q, k, v, g, lam)  # norm_weight None, eps 1e-5, sigmoid gate
    assert scaled_error(out, reference64(q, k, v, g, lam, None)) < 1e-5
    out = ops.gdla_attention(q, k, v, g, lam, None, 0.5, GATE_KINDS["silu"])
    assert scaled_error(out, reference64(q, k, v, g, lam, None, 0.5, 1)) < 1e-5


def test_lam_and_weight_in_another_float_type(ops):
    q, k, v, g, lam, w = make_inputs(1, 2, 30, 16, seed=4)
    out = ops.gdla_attention(q, k, v, g, lam.double(), w.half(), 1e-5, 0)
    ref = reference64(q, k, v, g, lam, w.half(), 1e-5, 0)
    assert scaled_error(out, ref) < 1e-5


def test_non_contiguous_inputs(ops):
    # The model's layout: [B, N, 4, H, D] projections permuted to [4, B, H, N, D].
    b, h, n, dim = 2, 3, 50, 16
    gen = torch.Generator().manual_seed(5)
    qkvg = torch.randn(b, n, 4, h, dim, generator=gen).permute(2, 0, 3, 1, 4)
    lam = torch.randn(dim, h, generator=gen).t()
    w = torch.randn(2 * dim, generator=gen)[::2]
    assert not qkvg[0].is_contiguous() and not lam.is_contiguous() and not w.is_contiguous()
    out = ops.gdla_attention(qkvg[0], qkvg[1], qkvg[2], qkvg[3], lam, w, 1e-5, 1)
    dense = [t.contiguous() for t in (qkvg[0], qkvg[1], qkvg[2], qkvg[3], lam, w)]
    assert torch.equal(out, ops.gdla_attention(*dense, 1e-5, 1))
    assert scaled_error(out, reference64(*dense, 1e-5, 1)) < 1e-5


def test_result_does_not_depend_on_thread_count(ops):
    q, k, v, g, lam, w = make_inputs(1, 1, 3136, 32, seed=6)  # 7 summary chunks
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.gdla_attention(q, k, v, g, lam, w, 1e-5, 0)
        torch.set_num_threads(2)
        two = ops.gdla_attention(q, k, v, g, lam, w, 1e-5, 0)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)


def test_generic_head_dim_and_extreme_inputs(ops):
    # D = 12 runs the runtime-width kernel; large negative q/k drive phi towards 0 and
    # large |g| saturate the gate. Such inputs cost float32 some accuracy (the eager float32
    # reference is about 1e-5 off with the SiLU gate), so the bound is relative to it.
    q, k, v, g, lam, w = make_inputs(2, 2, 37, 12, seed=7)
    q, k, g = q * 8, k * 8, g * 60
    for gate in GATES:
        out = ops.gdla_attention(q, k, v, g, lam, w, 1e-5, gate)
        assert torch.isfinite(out).all()
        ref = reference64(q, k, v, g, lam, w, 1e-5, gate)
        eager32 = scaled_error(gdla_reference(q, k, v, g, lam, w, 1e-5, gate), ref)
        assert scaled_error(out, ref) < max(1e-5, 2 * eager32)


def test_no_tokens(ops):
    q, k, v, g, lam, w = make_inputs(2, 2, 0, 16)
    out = ops.gdla_attention(q, k, v, g, lam, w, 1e-5, 0)
    assert out.shape == (2, 2, 0, 16)


@pytest.mark.parametrize("bad, message", [
    ("rank", "q must be \\[B, H, N, D\\]"),
    ("k_shape", "k .* must have q's shape"),
    ("g_shape", "g .* must have q's shape"),
    ("odd_dim", "must be even"),
    ("lam_shape", "lam must be \\[H, D\\]"),
    ("weight_shape", "norm_weight must be \\[D\\]"),
    ("dtype", "must share a dtype"),
    ("int_inputs", "floating point"),
    ("int_lam", "lam must be floating point"),
    ("gate_high", "gate must be"),
    ("gate_low", "gate must be"),
    ("eps", "eps must be"),
])
def test_rejects_bad_arguments(ops, bad, message):
    q, k, v, g, lam, w = make_inputs(1, 2, 5, 8)
    eps, gate = 1e-5, 0
    if bad == "rank":
        q, k, v, g = q[0], k[0], v[0], g[0]
    elif bad == "k_shape":
        k = k[:, :, :4]
    elif bad == "g_shape":
        g = g[:, :1]
    elif bad == "odd_dim":
        q, k, v, g, lam, w = make_inputs(1, 2, 5, 7)
    elif bad == "lam_shape":
        lam = lam[:1]
    elif bad == "weight_shape":
        w = w[:4]
    elif bad == "dtype":
        v = v.double()
    elif bad == "int_inputs":
        q, k, v, g = (t.to(torch.int32) for t in (q, k, v, g))
    elif bad == "int_lam":
        lam = lam.to(torch.int64)
    elif bad == "gate_high":
        gate = 3
    elif bad == "gate_low":
        gate = -1
    elif bad == "eps":
        eps = -1.0
    with pytest.raises(RuntimeError, match=message):
        ops.gdla_attention(q, k, v, g, lam, w, eps, gate)


def test_baseline_isa_path_matches_reference(ops):
    """The non-AVX2 build of the float kernels, forced through GATESCOPE_DISABLE_AVX2."""
    out = printed_without_avx2(
        "from test_gdla_op import make_inputs, reference64, scaled_error\n"
        "worst = 0.0\n"
        "for shape in [(2, 2, 49, 16), (1, 2, 700, 32), (1, 1, 33, 64), (1, 2, 20, 10)]:\n"
        "    a = make_inputs(*shape)\n"
        "    out = torch.ops.gatescope.gdla_attention(*a, 1e-5, 1)\n"
        "    worst = max(worst, scaled_error(out, reference64(*a, 1e-5, 1)))\n"
        "print(worst)\n")
    assert float(out.strip()) < 1e-5


def test_nan_propagates_like_the_reference(ops):
    g = torch.Generator().manual_seed(11)
    q, k, v, gate = (torch.randn(1, 2, 20, 16, generator=g) for _ in range(4))
    lam = torch.rand(2, 16, generator=g)
    q[0, 1, 5, 3] = float("nan")
    out = ops.gdla_attention(q, k, v, gate, lam, None, 1e-5, 0)
    ref = gdla_reference(q, k, v, gate, lam, None, 1e-5, 0)
    assert torch.equal(torch.isnan(out), torch.isnan(ref)) and torch.isnan(out[0, 1, 5]).all()
    assert not torch.isnan(out[0, 0]).any()
