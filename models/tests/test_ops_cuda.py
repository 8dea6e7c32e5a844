"""The CUDA kernels of gatescope::dgsa_attention, dar_attention, gdla_attention and
plug_attention against the CPU kernel and the float64 eager reference (ms_deform_attn's CUDA
cases live in test_ms_deform_op.py). Every case needs a CUDA device and an op library built
against a CUDA LibTorch (scripts/gpu/gpu_check.sh); without one the module is skipped.

Tolerances (docs/gpu.md): float32 within 1e-4 and float16 within 2e-3 of the
reference, as max |out - ref| / max(1, |ref|); float16 cases compare with the reference on the
float16-rounded inputs, so only the kernel's own arithmetic is measured."""
import os

import pytest
import torch

from gatescope.attention.dar import dar_reference
from gatescope.attention.dgsa import dgsa_reference
from gatescope.attention.gdla import gdla_reference
from gatescope.attention.plug import plug_reference
from op_errors import scaled_error

# GATESCOPE_OPS_TEST_DEVICE=cpu runs the same cases against the CPU kernels: a dry run of
# this file's inputs, references and tolerances on a machine without a device.
DEVICE = os.environ.get("GATESCOPE_OPS_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(),
                                reason="no CUDA device")

TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-3}
DTYPES = [torch.float32, torch.float16]


@pytest.fixture(scope="module")
def cuda_ops(ops):
    """The op library, failing (not skipping) when its CUDA backend is missing."""
    probe = torch.zeros(1, 1, 1, 8, device=DEVICE)
    try:
        ops.dgsa_attention(probe, probe, probe, probe, probe, torch.zeros(1, 1, 1, device=DEVICE))
    except RuntimeError as e:
        pytest.fail(f"the op library has no CUDA backend (built against a CPU LibTorch?): {e}")
    return ops


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)



def on_cuda(tensors, dtype):
    return [None if t is None else t.to(DEVICE, dtype) for t in tensors]


def key_mask(b, nk, seed):
    """[B, Nk] bool, nonzero = visible: row 0 all visible, the others with a hidden tail and
    hidden keys scattered; one row fully hidden when B > 2."""
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(b, nk, generator=gen) > 0.25
    mask[0] = True
    if b > 1:
        mask[1, nk // 2:] = False
        mask[1, 0] = True
    if b > 2:
        mask[2] = False
    return mask


# --- DGSA ----------------------------------------------------------------------------------
# (B, H, Nq, Nk, d, dv): single token, odd N with batch > 1, around a key block, ViT-B/16,
# cross attention, the largest head dim the kernel takes.
DGSA_SHAPES = [(1, 1, 1, 1, 8, 16), (2, 4, 17, 17, 8, 16), (3, 2, 63, 65, 16, 32),
               (2, 2, 197, 197, 32, 64), (1, 2, 50, 130, 8, 8), (1, 2, 33, 33, 128, 128)]


def dgsa_inputs(b, h, nq, nk, d, dv, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [randn(gen, b, h, nq, d), randn(gen, b, h, nk, d), randn(gen, b, h, nq, d),
            randn(gen, b, h, nk, d), randn(gen, b, h, nk, dv),
            torch.rand(b, h, nq, generator=gen, dtype=torch.float64)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", DGSA_SHAPES)
@pytest.mark.parametrize("masked", [False, True])
def test_dgsa(cuda_ops, shape, dtype, masked):
    args = dgsa_inputs(*shape)
    mask = key_mask(shape[0], shape[3], seed=1) if masked else None
    dev = on_cuda(args, dtype)
    out = cuda_ops.dgsa_attention(*dev, None if mask is None else mask.to(DEVICE))
    assert out.device.type == DEVICE and out.dtype == dtype and out.shape == (*shape[:3], shape[5])
    rounded = [t.cpu().double() for t in dev]
    assert scaled_error(out, dgsa_reference(*rounded, key_padding_mask=mask)) <= TOLERANCE[dtype]
    if dtype == torch.float32:  # the CPU kernel on the same values
        cpu = cuda_ops.dgsa_attention(*[t.float() for t in args], mask)
        assert scaled_error(out, cpu) <= TOLERANCE[dtype]


def test_dgsa_non_contiguous_and_bfloat16(cuda_ops):
    qp, kp, qn, kn, v, gate = dgsa_inputs(2, 3, 20, 20, 16, 16, seed=2)
    wide = [t.float().to(DEVICE).transpose(1, 2).contiguous().transpose(1, 2) for t in (qp, kp, qn, kn, v)]
    assert not wide[0].is_contiguous()
    out = cuda_ops.dgsa_attention(*wide, gate.float().to(DEVICE))
    ref = dgsa_reference(qp, kp, qn, kn, v, gate)
    assert scaled_error(out, ref) <= 1e-4
    bf = on_cuda([qp, kp, qn, kn, v, gate], torch.bfloat16)
    out = cuda_ops.dgsa_attention(*bf)
    assert out.dtype == torch.bfloat16
    assert scaled_error(out, dgsa_reference(*[t.cpu().double() for t in bf])) <= 1e-2


@pytest.mark.skipif(DEVICE != "cuda", reason="a device mismatch needs two devices")
def test_dgsa_device_mismatch_raises(cuda_ops):
    args = [t.float() for t in dgsa_inputs(1, 1, 4, 4, 8, 8)]
    with pytest.raises(RuntimeError):
        cuda_ops.dgsa_attention(*[t.to(DEVICE) for t in args[:5]], args[5])


# --- DAR -----------------------------------------------------------------------------------
DAR_SHAPES = [(1, 1, 1, 1, 8, 8), (2, 4, 17, 17, 16, 16), (1, 3, 63, 65, 16, 32),
              (2, 2, 197, 197, 32, 32), (1, 2, 50, 130, 8, 16), (1, 1, 40, 40, 128, 128)]
DAR_SETTINGS = [dict(lam=0.0), dict(lam=0.4, rho=0.5, alpha=8.0),
                dict(lam=0.8, rho=0.3, alpha=6.0, beta=0.5, steps=3)]


def dar_call(ops, q, k, v, mask=None, causal=False, lam=0.0, rho=0.5, alpha=8.0, beta=0.0,
             steps=1):
    return ops.dar_attention(q, k, v, mask, causal, lam, rho, alpha, beta, steps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", DAR_SHAPES)
@pytest.mark.parametrize("setting", DAR_SETTINGS)
def test_dar(cuda_ops, shape, dtype, setting):
    b, h, nq, nk, d, dv = shape
    gen = torch.Generator().manual_seed(3)
    args = [randn(gen, b, h, nq, d), randn(gen, b, h, nk, d), randn(gen, b, h, nk, dv)]
    dev = on_cuda(args, dtype)
    out, crossing = dar_call(cuda_ops, *dev, **setting)
    assert out.device.type == DEVICE and out.dtype == dtype and crossing.shape == (b, h)
    ref, ref_crossing = dar_reference(*[t.cpu().double() for t in dev], **setting)
    assert scaled_error(out, ref) <= TOLERANCE[dtype]
    # A pair whose cosine is within rounding of rho may land on either side of it.
    assert float((crossing.double().cpu() - ref_crossing).abs().max()) <= 2.0 / (nq * nk)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dar_masks(cuda_ops, causal, dtype):
    b, h, n, d = 3, 2, 37, 16
    gen = torch.Generator().manual_seed(4)
    args = [randn(gen, b, h, n, d) for _ in range(3)]
    mask = key_mask(b, n, seed=5)
    dev = on_cuda(args, dtype)
    out, _ = dar_call(cuda_ops, *dev, mask.to(DEVICE), causal, lam=0.5)
    ref, _ = dar_reference(*[t.cpu().double() for t in dev], mask, causal, lam=0.5)
    assert scaled_error(out, ref) <= TOLERANCE[dtype]


# --- GDLA ----------------------------------------------------------------------------------
# (B, H, N, D): single token, 7x7 grid, ViT-B/16, 224^2 at stride 4, an odd N, D = 128.
GDLA_SHAPES = [(1, 1, 1, 8), (2, 2, 49, 16), (1, 5, 197, 32), (2, 1, 3136, 64),
               (1, 2, 130, 32), (1, 1, 300, 128)]


def gdla_inputs(b, h, n, dim, seed=0, weight=True):
    gen = torch.Generator().manual_seed(seed)
    q, k, v, g = (randn(gen, b, h, n, dim) for _ in range(4))
    lam = 0.3 + 0.5 * randn(gen, h, dim)
    w = 1.0 + 0.2 * randn(gen, dim) if weight else None
    return [q, k, v, g, lam, w]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GDLA_SHAPES)
@pytest.mark.parametrize("gate", [0, 1, 2])
def test_gdla(cuda_ops, shape, dtype, gate):
    args = gdla_inputs(*shape, seed=6, weight=gate != 2)
    dev = on_cuda(args, dtype)
    out = cuda_ops.gdla_attention(*dev, 1e-5, gate)
    assert out.device.type == DEVICE and out.dtype == dtype and out.shape == shape
    rounded = [None if t is None else t.cpu().double() for t in dev]
    assert scaled_error(out, gdla_reference(*rounded, 1e-5, gate)) <= TOLERANCE[dtype]
    if dtype == torch.float32:
        cpu = cuda_ops.gdla_attention(*[None if t is None else t.float() for t in args], 1e-5, gate)
        assert scaled_error(out, cpu) <= TOLERANCE[dtype]


@pytest.mark.skipif(DEVICE != "cuda", reason="the CPU kernel takes any head dim")
def test_gdla_rejects_too_wide_heads(cuda_ops):
    args = on_cuda(gdla_inputs(1, 1, 4, 136), torch.float32)
    with pytest.raises(RuntimeError, match="head dim"):
        cuda_ops.gdla_attention(*args, 1e-5, 0)


# --- PLuG ----------------------------------------------------------------------------------
PLUG_SHAPES = [((1, 1, 1, 1, 8, 8), 8), ((2, 4, 17, 17, 16, 16), 16), ((1, 3, 65, 63, 16, 32), 32),
               ((2, 3, 197, 197, 64, 64), 64), ((1, 2, 50, 130, 8, 16), 24),
               ((2, 2, 70, 33, 32, 16), 32), ((1, 1, 20, 20, 128, 128), 16)]
PLUG_GATES = [(0.0, 0.0, 0.0, 1.0, True), (0.6, -0.8, 0.2, 0.9, True),
              (6.0, -5.0, 1.5, 2.0, True), (0.3, 0.25, 0.1, 0.5, False)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dg", PLUG_SHAPES)
@pytest.mark.parametrize("gate", PLUG_GATES)
def test_plug(cuda_ops, shape, dg, dtype, gate):
    b, h, n, m, d, dv = shape
    gen = torch.Generator().manual_seed(7)
    args = [randn(gen, b, h, n, d), randn(gen, b, h, m, d), randn(gen, b, h, m, dv),
            randn(gen, b, n, dg), randn(gen, b, m, dg)]
    *gml, tanh_gate = gate
    weight = torch.tensor([[gml[0]], [gml[1]]], dtype=torch.float64)
    bias = torch.tensor(gml[2:], dtype=torch.float64)
    scale, gate_scale = d ** -0.5, dg ** -0.5
    dev = on_cuda(args + [weight, bias], dtype)
    out = cuda_ops.plug_attention(*dev, scale, gate_scale, tanh_gate)
    assert out.device.type == DEVICE and out.dtype == dtype and out.shape == (b, h, n, dv)
    rounded = [t.cpu().double() for t in dev]
    ref = plug_reference(*rounded, scale, gate_scale, tanh_gate)
    assert scaled_error(out, ref) <= TOLERANCE[dtype]
    if dtype == torch.float32:
        cpu = cuda_ops.plug_attention(*[t.float() for t in args + [weight, bias]], scale,
                                      gate_scale, tanh_gate)
        assert scaled_error(out, cpu) <= TOLERANCE[dtype]


# --- All ops: empty batches and streams ----------------------------------------------------
@pytest.mark.skipif(DEVICE != "cuda", reason="streams are CUDA's")
def test_kernels_run_on_the_current_stream(cuda_ops):
    """Each op enqueues on the caller's current stream (the server gives every GPU instance
    its own): results computed on a side stream, read after synchronising it, are right."""
    side = torch.cuda.Stream()
    args = [t.float() for t in dgsa_inputs(2, 2, 64, 64, 32, 32, seed=8)]
    gen = torch.Generator().manual_seed(9)
    gd = gdla_inputs(2, 2, 500, 32, seed=10)
    with torch.cuda.stream(side):
        dev = [t.to(DEVICE) for t in args]
        out = cuda_ops.dgsa_attention(*dev)
        gdev = on_cuda(gd, torch.float32)
        gout = cuda_ops.gdla_attention(*gdev, 1e-5, 0)
        q = randn(gen, 1, 2, 64, 16).float().to(DEVICE)
        dout, _ = dar_call(cuda_ops, q, q, q, lam=0.3)
    side.synchronize()
    assert scaled_error(out, dgsa_reference(*[t.double() for t in args])) <= 1e-4
    assert scaled_error(gout, gdla_reference(*[None if t is None else t.double() for t in gd],
                                             1e-5, 0)) <= 1e-4
    qd = q.cpu().double()
    assert scaled_error(dout, dar_reference(qd, qd, qd, lam=0.3)[0]) <= 1e-4
