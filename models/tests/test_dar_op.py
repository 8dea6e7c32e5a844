"""gatescope::dar_attention (CPU) against the eager DAR reference, and the DAR option of
the attention modules (lambda = 0 is the plain model bit for bit)."""
import pytest
import torch

from gatescope.attention.dar import DarParams, dar_reference, dar_reference_maps
from gatescope.networks import VitConfig, build_classifier

SHAPES = [
    (1, 1, 1, 1, 8, 8),        # single token
    (2, 4, 17, 17, 16, 16),    # ViT patch-7 grid + class token
    (1, 3, 63, 65, 16, 32),    # around a key block
    (2, 2, 197, 197, 32, 32),  # ViT-B/16 sequence length
    (1, 2, 50, 130, 8, 16),    # cross attention
]
SETTINGS = [
    dict(lam=0.0),
    dict(lam=0.4, rho=0.5, alpha=8.0),
    dict(lam=1.5, rho=0.0, alpha=4.0),
    dict(lam=0.8, rho=0.3, alpha=6.0, beta=0.5, steps=3),  # alpha*beta/4 = 0.75
]


def inputs(b, h, nq, nk, d, dv, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dtype)  # noqa: E731
    return r(b, h, nq, d), r(b, h, nk, d), r(b, h, nk, dv)


def call(ops, q, k, v, mask=None, causal=False, lam=0.0, rho=0.5, alpha=8.0, beta=0.0, steps=1):
    return ops.dar_attention(q, k, v, mask, causal, lam, rho, alpha, beta, steps)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("setting", SETTINGS)
def test_matches_reference(ops, shape, setting):
    q, k, v = inputs(*shape)
    out, crossing = call(ops, q, k, v, **setting)
    ref_out, ref_crossing = dar_reference(q.double(), k.double(), v.double(), **setting)
    assert out.shape == ref_out.shape and crossing.shape == shape[:2]
    assert torch.allclose(out, ref_out.float(), atol=1e-5, rtol=0), (out - ref_out).abs().max()
    # A pair whose cosine is within rounding of rho may land on either side.
    nq, nk = shape[2], shape[3]
    assert torch.allclose(crossing.double(), ref_crossing, atol=1.5 / (nq * nk))


@pytest.mark.parametrize("causal", [False, True])
def test_masks(ops, causal):
    q, k, v = inputs(3, 2, 40, 40, 16, 16, seed=5)
    mask = torch.rand(3, 40, generator=torch.Generator().manual_seed(1)) > 0.4
    mask[1] = False          # batch 1: every key padded -> zero rows
    mask[2, 0] = False       # with causal, row 0 of batch 2 sees nothing
    setting = dict(lam=0.6, rho=0.4, alpha=8.0)
    out, crossing = call(ops, q, k, v, mask, causal, **setting)
    ref_out, ref_crossing = dar_reference(q.double(), k.double(), v.double(), mask, causal,
                                          **setting)
    assert torch.allclose(out, ref_out.float(), atol=1e-5, rtol=0)
    assert torch.allclose(crossing.double(), ref_crossing, atol=1.5 / 1600)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    assert torch.equal(crossing[1], torch.zeros_like(crossing[1]))
    if causal:
        assert torch.equal(out[2, :, 0], torch.zeros_like(out[2, :, 0]))


def test_float64_and_half(ops):
    q, k, v = inputs(2, 2, 30, 30, 16, 16, seed=2, dtype=torch.float64)
    out, _ = call(ops, q, k, v, lam=0.5)
    assert out.dtype == torch.float64
    assert torch.allclose(out, dar_reference(q, k, v, lam=0.5)[0], atol=1e-10, rtol=0)
    out16, crossing16 = call(ops, q.half(), k.half(), v.half(), lam=0.5)
    assert out16.dtype == torch.float16 and crossing16.dtype == torch.float16
    ref = dar_reference(q.half().double(), k.half().double(), v.half().double(), lam=0.5)[0]
    assert torch.allclose(out16.double(), ref, atol=2e-3)


def test_resonance_raises_agreeing_pairs(ops):
    # Keys 0 and 1 have equal dot products with the query but only key 0 is parallel to it.
    q = torch.tensor([[[[1.0, 0.0]]]])
    k = torch.tensor([[[[2.0, 0.0], [2.0, 5.0]]]])
    v = torch.tensor([[[[1.0], [0.0]]]])
    plain, _ = call(ops, q, k, v, lam=0.0)
    dar, crossing = call(ops, q, k, v, lam=2.0, rho=0.8, alpha=10.0)
    assert abs(float(plain) - 0.5) < 1e-6        # equal logits: equal weights
    assert float(dar) > 0.8                      # resonance favours the parallel key
    assert float(crossing) == pytest.approx(0.5)  # cos 1 > 0.8, cos 0.37 < 0.8


def test_rejects_bad_arguments(ops):
    q, k, v = inputs(1, 1, 4, 4, 8, 8)
    with pytest.raises(RuntimeError, match="alpha \\* beta / 4 < 1"):
        call(ops, q, k, v, lam=1.0, alpha=8.0, beta=0.5, steps=2)
    with pytest.raises(RuntimeError, match="steps must be >= 1"):
        call(ops, q, k, v, steps=0)
    with pytest.raises(RuntimeError, match="key_padding_mask"):
        call(ops, q, k, v, torch.ones(1, 5, dtype=torch.bool))
    with pytest.raises(ValueError):
        DarParams(lam=1.0, alpha=8.0, beta=0.5, steps=2).validate()


def test_reference_maps_are_consistent():
    q, k, v = inputs(1, 2, 9, 9, 8, 8, seed=3, dtype=torch.float64)
    out, attn, r, crossing = dar_reference_maps(q, k, v, lam=0.5)
    assert torch.allclose(attn.sum(-1), torch.ones(1, 2, 9, dtype=torch.float64))
    assert ((r > 0) & (r < 1)).all()
    assert torch.allclose(out, attn @ v)


@pytest.mark.parametrize("arch", ["vit", "dgvit", "diffvit"])
def test_lambda_zero_is_the_plain_model_bit_for_bit(arch):
    torch.manual_seed(0)
    plain = build_classifier(VitConfig(arch=arch, patch_size=7)).eval()
    dar = build_classifier(VitConfig(arch=arch, patch_size=7, dar=True, dar_lambda=0.0)).eval()
    dar.load_state_dict(plain.state_dict())  # DAR adds no parameters
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        assert torch.equal(plain(x)["logits"], dar(x)["logits"])
        a = plain.explain(x)["attention"]
        b = dar.explain(x)["attention"]
    assert all(torch.equal(u, w) for u, w in zip(a, b))


@pytest.mark.parametrize("arch", ["vit", "dgvit", "diffvit"])
def test_fused_dar_matches_eager(ops, arch):
    torch.manual_seed(1)
    model = build_classifier(VitConfig(arch=arch, patch_size=7, dar=True)).eval()
    x = torch.randn(3, 1, 28, 28)
    with torch.no_grad():
        eager = model(x)
        model.set_fused(True)
        fused = model(x)
    assert torch.allclose(eager["logits"], fused["logits"], atol=1e-4)
    assert torch.allclose(eager["vigilance_mean"], fused["vigilance_mean"], atol=0.02)
