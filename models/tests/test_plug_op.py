"""gatescope::plug_attention (CPU) against the eager PLuG reference
(gatescope.attention.plug.plug_reference)."""
import math

import pytest
import torch

from gatescope.attention.plug import PlugAttention, plug_reference

# (B, H, N, M, d, dv); the gate dim dg is given per case below.
SHAPES = [
    (1, 1, 1, 1, 8, 8),        # single token
    (2, 4, 17, 17, 16, 16),    # ViT patch-7 grid + class token
    (1, 3, 65, 63, 16, 32),    # around a key block and a row block
    (2, 3, 197, 197, 64, 64),  # DeiT sequence length, d = 64
    (1, 2, 50, 130, 8, 16),    # cross attention, M > N
    (2, 2, 70, 33, 32, 16),    # cross attention, M < N
]
GATE_DIMS = [8, 16, 32, 64, 24, 32]
# (w_a, w_b, b_a, b_b, tanh_gate)
GATES = [
    (0.0, 0.0, 0.0, 1.0, True),     # initial gate: G = 0
    (0.6, -0.8, 0.2, 0.9, True),
    (-1.3, 0.7, -0.4, 0.3, True),
    (6.0, -5.0, 1.5, 2.0, True),    # large: G saturates for most pairs
    (0.3, 0.25, 0.1, 0.5, False),   # no tanh: G unbounded
]


def inputs(b, h, n, m, d, dv, dg, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype)  # noqa: E731
    return r(b, h, n, d), r(b, h, m, d), r(b, h, m, dv), r(b, n, dg), r(b, m, dg)


def gml(w_a, w_b, b_a, b_b, dtype=torch.float32):
    return (torch.tensor([[w_a], [w_b]], dtype=dtype), torch.tensor([b_a, b_b], dtype=dtype))


def call(ops, q, k, v, qg, kg, weight, bias, tanh_gate=True, scale=None, gate_scale=None):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    gate_scale = qg.shape[-1] ** -0.5 if gate_scale is None else gate_scale
    return ops.plug_attention(q, k, v, qg, kg, weight, bias, scale, gate_scale, tanh_gate)


def reference(q, k, v, qg, kg, weight, bias, tanh_gate=True, scale=None, gate_scale=None):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    gate_scale = qg.shape[-1] ** -0.5 if gate_scale is None else gate_scale
    d = lambda t: t.double()  # noqa: E731
    return plug_reference(d(q), d(k), d(v), d(qg), d(kg), d(weight), d(bias), scale, gate_scale,
                          tanh_gate)


def max_rel_err(out, ref):
    return float(((out.double() - ref).abs() / ref.abs().clamp_min(1.0)).max())


@pytest.mark.parametrize("shape,dg", list(zip(SHAPES, GATE_DIMS)))
@pytest.mark.parametrize("gate", GATES)
def test_matches_reference(ops, shape, dg, gate):
    *gml_values, tanh_gate = gate
    args = inputs(*shape, dg)
    weight, bias = gml(*gml_values)
    out = call(ops, *args, weight, bias, tanh_gate)
    ref = reference(*args, weight, bias, tanh_gate)
    assert out.shape == ref.shape and out.dtype == torch.float32
    # Steep gates amplify float32 rounding of r (dG/dr up to ~|w_a w_b| |r|).
    tol = 3e-5 if max(abs(gml_values[0]), abs(gml_values[1])) > 2 else 1e-5
    assert max_rel_err(out, ref) < tol


@pytest.mark.parametrize("tanh_gate", [True, False])
def test_float64_is_tight(ops, tanh_gate):
    args = inputs(2, 3, 45, 70, 16, 24, 12, seed=2, dtype=torch.float64)
    weight, bias = gml(1.7, -0.9, 0.3, 0.6, dtype=torch.float64)
    out = call(ops, *args, weight, bias, tanh_gate, scale=0.3, gate_scale=0.4)
    assert out.dtype == torch.float64
    ref = reference(*args, weight, bias, tanh_gate, scale=0.3, gate_scale=0.4)
    assert max_rel_err(out, ref) < 1e-12


@pytest.mark.parametrize("tanh_gate", [True, False])
def test_float16_on_rounded_inputs(ops, tanh_gate):
    args = [t.half() for t in inputs(2, 3, 80, 67, 32, 32, 32, seed=4)]
    weight, bias = gml(0.8, -0.6, 0.2, 0.7)
    out = call(ops, *args, weight, bias, tanh_gate)
    assert out.dtype == torch.float16
    # The reference sees the same half-rounded inputs; the op accumulates in float32 and
    # rounds the result to half once.
    assert max_rel_err(out, reference(*args, weight, bias, tanh_gate)) < 2e-3


def test_bfloat16_runs_in_float(ops):
    args = [t.bfloat16() for t in inputs(1, 2, 20, 20, 16, 16, 16, seed=6)]
    weight, bias = gml(0.5, 0.5, 0.0, 1.0)
    out = call(ops, *args, weight, bias)
    assert out.dtype == torch.bfloat16
    assert max_rel_err(out, reference(*args, weight, bias)) < 1e-2


def test_gml_in_another_dtype_and_layout(ops):
    # Weights of a float64 (or flat [2]) gml are accepted with float32 activations.
    args = inputs(1, 2, 19, 23, 16, 16, 8, seed=8)
    weight, bias = gml(0.9, 1.1, -0.2, 0.4, dtype=torch.float64)
    out = call(ops, *args, weight.reshape(2), bias)
    assert max_rel_err(out, reference(*args, weight, bias)) < 2e-5


def test_non_contiguous_inputs(ops):
    b, h, n, d, dg = 2, 3, 37, 16, 8
    g = torch.Generator().manual_seed(9)
    # q, k, v as views of a fused qkv projection, like timm's attention: [3, B, H, N, d].
    qkv = torch.randn(b, n, 3, h, d, generator=g).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    gates = torch.randn(b, n, 2 * dg, generator=g)
    qg, kg = gates[..., :dg], gates[..., dg:]          # strided last-dim slices
    weight = torch.tensor([[0.7, 0.0], [-0.5, 0.0]])[:, :1]  # non-contiguous [2, 1]
    bias = torch.tensor([0.1, 0.0, 0.8, 0.0])[::2]           # strided [2]
    assert not (q.is_contiguous() or qg.is_contiguous() or bias.is_contiguous())
    out = call(ops, q, k, v, qg, kg, weight, bias)
    ref = reference(q, k, v, qg, kg, weight, bias)
    assert max_rel_err(out, ref) < 2e-5
    contiguous = call(ops, *(t.contiguous() for t in (q, k, v, qg, kg)), weight.contiguous(),
                      bias.contiguous())
    assert torch.equal(out, contiguous)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 8, 8), (2, 3, 130, 77, 32, 16)])
def test_gate_off_is_plain_softmax_attention(ops, shape):
    q, k, v, qg, kg = inputs(*shape, 16, seed=10)
    weight, bias = gml(0.0, 0.0, 0.0, 1.0)  # PlugAttention's initialisation: G = 0
    scale = shape[4] ** -0.5
    out = call(ops, q, k, v, qg, kg, weight, bias, scale=scale)
    plain = ((q.double() @ k.double().transpose(-2, -1)) * scale).softmax(-1) @ v.double()
    assert max_rel_err(out, plain) < 2e-5
    # Without tanh and with G = 0 it is the same.
    out_no_tanh = call(ops, q, k, v, qg, kg, weight, bias, tanh_gate=False, scale=scale)
    assert torch.equal(out, out_no_tanh)


def test_gate_changes_the_result(ops):
    args = inputs(1, 2, 30, 30, 16, 16, 16, seed=11)
    off = call(ops, *args, *gml(0.0, 0.0, 0.0, 1.0))
    on = call(ops, *args, *gml(2.0, 2.0, 0.5, 0.5))
    assert (off - on).abs().max() > 1e-2


def test_saturated_gate_scales_logits(ops):
    # tanh(huge) = 1 for every pair: logits are doubled, i.e. softmax at scale 2 * scale.
    q, k, v, qg, kg = inputs(1, 2, 25, 31, 16, 16, 8, seed=12)
    weight, bias = gml(0.0, 0.0, 100.0, 100.0)
    out = call(ops, q, k, v, qg, kg, weight, bias, scale=0.25)
    plain = ((q.double() @ k.double().transpose(-2, -1)) * 0.5).softmax(-1) @ v.double()
    assert max_rel_err(out, plain) < 2e-5
    # G = -1 for every pair: all logits are 0, the output is the mean of the values.
    out = call(ops, q, k, v, qg, kg, *gml(0.0, 0.0, 100.0, -100.0), scale=0.25)
    mean = v.double().mean(2, keepdim=True).expand_as(out)
    assert max_rel_err(out, mean) < 2e-6


def test_empty_sizes(ops):
    weight, bias = gml(0.5, 0.5, 0.0, 1.0)
    out = call(ops, *inputs(2, 3, 0, 5, 8, 4, 8), weight, bias)
    assert out.shape == (2, 3, 0, 4)
    # No keys: every row is 0 (the reference's empty softmax times empty v).
    q, k, v, qg, kg = inputs(2, 3, 5, 0, 8, 4, 8)
    out = call(ops, q, k, v, qg, kg, weight, bias)
    assert out.shape == (2, 3, 5, 4) and torch.equal(out, torch.zeros_like(out))
    assert torch.equal(out, reference(q, k, v, qg, kg, weight, bias).float())


def test_results_do_not_depend_on_threads(ops):
    args = inputs(1, 4, 197, 197, 32, 32, 32, seed=13)
    weight, bias = gml(0.6, -0.8, 0.2, 0.9)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = call(ops, *args, weight, bias)
        torch.set_num_threads(2)
        two = call(ops, *args, weight, bias)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)


def test_rejects_bad_arguments(ops):
    q, k, v, qg, kg = inputs(2, 2, 6, 7, 8, 8, 4)
    weight, bias = gml(0.5, 0.5, 0.0, 1.0)
    bad = [
        ((q[0], k, v, qg, kg, weight, bias), "q must be"),
        ((q, k[:, :, :, :4], v, qg, kg, weight, bias), "does not fit q"),
        ((q, k, v[:, :, :5], qg, kg, weight, bias), "does not fit k"),
        ((q, k, v, qg[0], kg, weight, bias), "3-D"),
        ((q, k, v, qg[:, :5], kg, weight, bias), "q_gate"),
        ((q, k, v, qg, kg[..., :3], weight, bias), "k_gate"),
        ((q, k, v, qg, kg[:1], weight, bias), "k_gate"),
        ((q, k.double(), v, qg, kg, weight, bias), "share a dtype"),
        ((q, k, v, qg.double(), kg, weight, bias), "share a dtype"),
        ((q.int(), k.int(), v.int(), qg.int(), kg.int(), weight, bias), "floating point"),
        ((q, k, v, qg, kg, torch.ones(3, 1), bias), "gml_weight"),
        ((q, k, v, qg, kg, weight, torch.ones(1)), "gml_bias"),
        ((q, k, v, qg, kg, weight.int(), bias), "floating point"),
        ((q[..., :0], k[..., :0], v, qg, kg, weight, bias), "empty"),
    ]
    for args, message in bad:
        with pytest.raises(RuntimeError, match=message):
            call(ops, *args, scale=0.5, gate_scale=0.5)
    with pytest.raises(RuntimeError, match="finite"):
        call(ops, q, k, v, qg, kg, weight, bias, scale=math.inf)
    with pytest.raises(RuntimeError, match="finite"):
        call(ops, q, k, v, qg, kg, weight, bias, gate_scale=math.nan)


def test_module_fused_matches_eager(ops):
    torch.manual_seed(3)
    module = PlugAttention(dim=96, num_heads=3, gate_dim=16).eval()
    with torch.no_grad():
        module.gml.weight.copy_(torch.tensor([[1.2], [-0.7]]))
        module.gml.bias.copy_(torch.tensor([0.3, 0.8]))
    x = torch.randn(2, 50, 96)
    with torch.no_grad():
        eager, _ = module(x)
        module.use_fused = True
        fused, _ = module(x)
    assert torch.allclose(eager, fused, atol=1e-5)
