"""gatescope::ms_deform_attn (CPU; CUDA when a device exists) against the eager grid_sample
reference."""
import pytest
import torch

from gatescope.attention.ms_deform import level_start_index, ms_deform_attn_reference
from op_errors import scaled_error

# The public Deformable-DETR test problem: N, M, D = 1, 2, 2; Lq, L, P = 2, 2, 2.
SMALL_LEVELS = [(6, 4), (3, 2)]
REALISTIC_LEVELS = [(32, 32), (16, 16), (8, 8), (4, 4)]
# (N, M, D, Lq, P, levels)
SMALL = [(1, 2, d, 2, 2, SMALL_LEVELS) for d in (2, 30, 32, 64, 71)]
REALISTIC = (2, 8, 32, 300, 4, REALISTIC_LEVELS)
ODD = (3, 3, 5, 37, 3, [(5, 7), (1, 1), (2, 9)])  # odd sizes, a 1x1 level, 37 queries


def make_inputs(n, m, d, lq, p, levels, dtype=torch.float32, seed=0, spread=0.15):
    """value, spatial_shapes, level_start_index, sampling_locations, attention_weights.

    Locations are uniform in [-spread, 1 + spread], so some points fall partly or wholly
    outside their map; attention weights are positive and sum to 1 per (query, head).
    """
    gen = torch.Generator().manual_seed(seed)
    shapes = torch.tensor(levels, dtype=torch.long)
    starts = level_start_index(shapes)
    s = int((shapes[:, 0] * shapes[:, 1]).sum())
    value = torch.rand(n, s, m, d, generator=gen, dtype=torch.float64) * 2 - 1
    loc = torch.rand(n, lq, m, len(levels), p, 2, generator=gen, dtype=torch.float64)
    loc = loc * (1 + 2 * spread) - spread
    w = torch.rand(n, lq, m, len(levels), p, generator=gen, dtype=torch.float64) + 1e-5
    w = w / w.sum((-1, -2), keepdim=True)
    return value.to(dtype), shapes, starts, loc.to(dtype), w.to(dtype)


def reference64(value, shapes, loc, w):
    """The eager reference in float64 on the given (possibly rounded) values."""
    return ms_deform_attn_reference(value.double(), shapes, loc.double(), w.double())



def test_public_test_problem_float64(ops):
    # As in the public test: values scaled by 0.01, locations in [0, 1).
    gen = torch.Generator().manual_seed(3)
    shapes = torch.tensor(SMALL_LEVELS, dtype=torch.long)
    starts = level_start_index(shapes)
    assert starts.tolist() == [0, 24]
    value = torch.rand(1, 30, 2, 2, generator=gen, dtype=torch.float64) * 0.01
    loc = torch.rand(1, 2, 2, 2, 2, 2, generator=gen, dtype=torch.float64)
    w = torch.rand(1, 2, 2, 2, 2, generator=gen, dtype=torch.float64) + 1e-5
    w = w / w.sum((-1, -2), keepdim=True)
    out = ops.ms_deform_attn(value, shapes, starts, loc, w)
    assert out.shape == (1, 2, 4) and out.dtype == torch.float64
    ref = ms_deform_attn_reference(value, shapes, loc, w)
    assert torch.allclose(out, ref, atol=1e-15, rtol=1e-12), (out - ref).abs().max()


@pytest.mark.parametrize("problem", SMALL + [REALISTIC, ODD],
                         ids=lambda pr: f"n{pr[0]}m{pr[1]}d{pr[2]}q{pr[3]}p{pr[4]}l{len(pr[5])}")
def test_matches_reference_float32(ops, problem):
    value, shapes, starts, loc, w = make_inputs(*problem, seed=1)
    out = ops.ms_deform_attn(value, shapes, starts, loc, w)
    n, m, d, lq = problem[:4]
    assert out.shape == (n, lq, m * d) and out.dtype == torch.float32
    assert scaled_error(out, reference64(value, shapes, loc, w)) < 1e-5
    # The float32 grid_sample reference agrees to the same tolerance.
    assert scaled_error(out, ms_deform_attn_reference(value, shapes, loc, w)) < 1e-5


@pytest.mark.parametrize("problem", SMALL + [REALISTIC, ODD],
                         ids=lambda pr: f"n{pr[0]}m{pr[1]}d{pr[2]}q{pr[3]}p{pr[4]}l{len(pr[5])}")
def test_matches_reference_float64(ops, problem):
    value, shapes, starts, loc, w = make_inputs(*problem, dtype=torch.float64, seed=2)
    out = ops.ms_deform_attn(value, shapes, starts, loc, w)
    assert out.dtype == torch.float64
    ref = ms_deform_attn_reference(value, shapes, loc, w)
    assert torch.allclose(out, ref, atol=1e-12, rtol=1e-12), (out - ref).abs().max()


@pytest.mark.parametrize("problem", [SMALL[2], SMALL[4], REALISTIC, ODD],
                         ids=lambda pr: f"n{pr[0]}m{pr[1]}d{pr[2]}q{pr[3]}")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_matches_reference_reduced_precision(ops, problem, dtype):
    value, shapes, starts, loc, w = make_inputs(*problem, dtype=dtype, seed=3)
    out = ops.ms_deform_attn(value, shapes, starts, loc, w)
    assert out.dtype == dtype
    # The reference sees the same rounded values; the output is rounded to the dtype
    # (|out| <= 1 here: half an ulp is 2^-11 for float16, 2^-8 for bfloat16).
    tol = 2e-3 if dtype == torch.float16 else 8e-3
    assert scaled_error(out, reference64(value, shapes, loc, w)) < tol


def test_borders_and_pixel_centres_float64(ops):
    """Pixel coordinates u = loc * size - 0.5 just inside / outside the bilinear support
    (-1, size), on the border pixels' centres and edges, in float64."""
    value, shapes, starts, loc, w = make_inputs(2, 2, 8, 16, 4, SMALL_LEVELS,
                                                dtype=torch.float64, seed=4)
    hw = shapes.to(torch.float64)
    size = torch.stack([hw[:, 1], hw[:, 0]], -1).view(1, 1, 1, 2, 1, 2)  # loc is (x, y)
    # u = a * size + b
    a = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 1], dtype=torch.float64)
    b = torch.tensor([-1 - 1e-9, -1 + 1e-9, -0.5, 0.0, 0.25, -1.0, -0.5, -1e-9, 1e-9],
                     dtype=torch.float64)
    pick = torch.randint(0, a.numel(), loc.shape, generator=torch.Generator().manual_seed(5))
    loc = (a[pick] * size + b[pick] + 0.5) / size
    out = ops.ms_deform_attn(value, shapes, starts, loc, w)
    ref = ms_deform_attn_reference(value, shapes, loc, w)
    assert out.abs().max() > 0.05
    assert torch.allclose(out, ref, atol=1e-12, rtol=1e-12), (out - ref).abs().max()


def test_points_outside_every_map_give_zero(ops):
    value, shapes, starts, loc, w = make_inputs(1, 2, 4, 6, 2, SMALL_LEVELS, seed=7)
    # Beyond the support of the coarser (3 x 2) map on every side.
    far = torch.tensor([-3.0, -0.5 / 2 - 1e-4, 1 + 0.5 / 2 + 1e-4, 2.5])
    loc = far[torch.arange(loc.numel()) % 4].view(loc.shape)
    out = ops.ms_deform_attn(value, shapes, starts, loc, w)
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.equal(ms_deform_attn_reference(value, shapes, loc, w), out)


def test_non_finite_inputs_propagate_like_reference(ops):
    value, shapes, starts, loc, w = make_inputs(1, 2, 4, 4, 2, SMALL_LEVELS, seed=8)
    loc[0, 0, 0, 0, 1, 0] = float("nan")      # (query 0, head 0): NaN location
    loc[0, 1, 1, 1, 0, 1] = float("inf")      # (query 1, head 1): infinite location
    loc[0, 2, 0, 1, 1] = torch.tensor([-2.0, 0.5])  # (query 2, head 0): outside ...
    w[0, 2, 0, 1, 1] = float("nan")           # ... with a NaN weight
    out = ops.ms_deform_attn(value, shapes, starts, loc, w).view(1, 4, 2, 4)
    ref = ms_deform_attn_reference(value, shapes, loc, w).view(1, 4, 2, 4)
    poisoned = torch.zeros(1, 4, 2, 4, dtype=torch.bool)
    poisoned[0, 0, 0] = poisoned[0, 1, 1] = poisoned[0, 2, 0] = True
    assert torch.equal(ref.isnan(), poisoned)
    assert torch.equal(out.isnan(), poisoned)
    assert torch.allclose(out[~poisoned], ref[~poisoned], atol=1e-6)


def test_non_contiguous_inputs(ops):
    n, m, d, lq, p, levels = 2, 4, 16, 50, 3, REALISTIC_LEVELS[1:]
    value, shapes, starts, loc, w = make_inputs(n, m, d, lq, p, levels, seed=9)
    expected = ops.ms_deform_attn(value, shapes, starts, loc, w)
    # value stored [N, M, S, D]; locations interleaved with junk; weights stored transposed;
    # the index tensors strided views.
    value_nc = value.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    loc_nc = torch.stack([loc, torch.full_like(loc, 9.0)], -1)[..., 0]
    w_nc = w.transpose(1, 2).contiguous().transpose(1, 2)
    shapes_nc = shapes.t().contiguous().t()
    starts_nc = torch.stack([starts, starts + 7], -1)[:, 0]
    for t in (value_nc, loc_nc, w_nc, shapes_nc, starts_nc):
        assert not t.is_contiguous()
    out = ops.ms_deform_attn(value_nc, shapes_nc, starts_nc, loc_nc, w_nc)
    assert torch.equal(out, expected)
    assert scaled_error(out, reference64(value, shapes, loc, w)) < 1e-5


def test_empty_problems(ops):
    value, shapes, starts, loc, w = make_inputs(2, 2, 4, 0, 2, SMALL_LEVELS, seed=10)
    assert ops.ms_deform_attn(value, shapes, starts, loc, w).shape == (2, 0, 8)
    value, shapes, starts, loc, w = make_inputs(2, 2, 4, 3, 0, SMALL_LEVELS, seed=10)
    assert torch.equal(ops.ms_deform_attn(value, shapes, starts, loc, w), torch.zeros(2, 3, 8))
    # No levels at all (S = 0).
    out = ops.ms_deform_attn(torch.zeros(1, 0, 2, 4), torch.zeros(0, 2, dtype=torch.long),
                             torch.zeros(0, dtype=torch.long), torch.zeros(1, 3, 2, 0, 4, 2),
                             torch.zeros(1, 3, 2, 0, 4))
    assert torch.equal(out, torch.zeros(1, 3, 8))


def test_thread_count_does_not_change_result(ops):
    value, shapes, starts, loc, w = make_inputs(*REALISTIC, seed=11)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.ms_deform_attn(value, shapes, starts, loc, w)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(ops.ms_deform_attn(value, shapes, starts, loc, w), one)


def _bad_cases():
    value, shapes, starts, loc, w = make_inputs(1, 2, 4, 3, 2, SMALL_LEVELS, seed=12)
    good = dict(value=value, shapes=shapes, starts=starts, loc=loc, w=w)

    def case(**changes):
        args = dict(good)
        args.update(changes)
        return args

    return {
        "value 3-D": case(value=value[0]),
        "value S too small": case(value=value[:, :-1]),
        "value S too large": case(value=torch.cat([value, value[:, :1]], 1)),
        "shapes not [L, 2]": case(shapes=shapes[:, :1]),
        "starts wrong length": case(starts=starts[:1]),
        "starts inconsistent": case(starts=torch.tensor([0, 23])),
        "starts not from zero": case(starts=starts + 1),
        "shapes sum too large": case(shapes=torch.tensor([[6, 4], [3, 3]])),
        "negative shape": case(shapes=torch.tensor([[-6, -4], [9, 6]]),
                               starts=torch.tensor([0, 24])),
        "shapes int32": case(shapes=shapes.int()),
        "starts float": case(starts=starts.double()),
        "loc 5-D": case(loc=loc[..., 0]),
        "loc last dim 3": case(loc=torch.cat([loc, loc[..., :1]], -1)),
        "loc wrong heads": case(loc=loc[:, :, :1]),
        "loc wrong levels": case(loc=loc[:, :, :, :1]),
        "loc wrong batch": case(loc=torch.cat([loc, loc])),
        "weights wrong points": case(w=w[..., :1]),
        "weights wrong queries": case(w=w[:, :2]),
        "dtype mismatch": case(loc=loc.double()),
        "weights dtype mismatch": case(w=w.half()),
        "integer value": case(value=value.int(), loc=loc.int(), w=w.int()),
    }


BAD = _bad_cases()


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_arguments_raise(ops, name):
    a = BAD[name]
    with pytest.raises(RuntimeError, match="ms_deform_attn"):
        ops.ms_deform_attn(a["value"], a["shapes"], a["starts"], a["loc"], a["w"])


def test_reference_rejects_inconsistent_shapes():
    value, shapes, starts, loc, w = make_inputs(1, 2, 4, 3, 2, SMALL_LEVELS, seed=13)
    with pytest.raises(ValueError):
        ms_deform_attn_reference(value[:, :-1], shapes, loc, w)
    with pytest.raises(ValueError):
        ms_deform_attn_reference(value, shapes, loc, w[..., :1])
    # A list of (H, W) works like the tensor.
    assert torch.equal(ms_deform_attn_reference(value, SMALL_LEVELS, loc, w),
                       ms_deform_attn_reference(value, shapes, loc, w))


def test_reference_gradients_flow():
    """The reference is the training path: value, locations and weights get gradients."""
    value, shapes, _, loc, w = make_inputs(1, 2, 3, 4, 2, SMALL_LEVELS, dtype=torch.float64,
                                           seed=14, spread=0.0)
    loc = loc.clamp(0.05, 0.95)  # away from pixel-centre kinks of the bilinear map
    args = [t.clone().requires_grad_() for t in (value, loc, w)]
    assert torch.autograd.gradcheck(
        lambda v, l, a: ms_deform_attn_reference(v, shapes, l, a), args, eps=1e-6, atol=1e-5)


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@cuda
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 2e-3),
                                       (torch.float64, 1e-12)])
@pytest.mark.parametrize("problem", SMALL + [REALISTIC, ODD],
                         ids=lambda pr: f"n{pr[0]}m{pr[1]}d{pr[2]}q{pr[3]}")
def test_cuda_matches_reference(ops, problem, dtype, tol):
    value, shapes, starts, loc, w = make_inputs(*problem, dtype=dtype, seed=15)
    dev = [t.cuda() for t in (value, shapes, starts, loc, w)]
    out = ops.ms_deform_attn(*dev)
    assert out.device.type == "cuda" and out.dtype == dtype
    assert scaled_error(out.cpu(), reference64(value, shapes, loc, w)) < tol


@cuda
def test_cuda_device_mismatch_raises(ops):
    value, shapes, starts, loc, w = make_inputs(1, 2, 4, 3, 2, SMALL_LEVELS, seed=16)
    with pytest.raises(RuntimeError, match="device"):
        ops.ms_deform_attn(value.cuda(), shapes, starts.cuda(), loc.cuda(), w.cuda())


def test_level_start_index_helper():
    assert level_start_index(torch.tensor(REALISTIC_LEVELS)).tolist() == [0, 1024, 1280, 1344]
    assert level_start_index(torch.zeros(0, 2, dtype=torch.long)).tolist() == []
