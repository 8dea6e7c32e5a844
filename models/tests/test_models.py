"""M-DGSA module semantics, fused vs eager paths, and the TorchScript export contract."""
import json

import pytest
import torch

from gatescope.attention import MultiheadDGSA
from gatescope.attention.dgsa import dgsa_reference_maps
from gatescope.networks import VitConfig, build_classifier


def small(arch, **kw):
    torch.manual_seed(0)
    cfg = VitConfig(arch=arch, patch_size=7, dim=32, depth=2, heads=2, dropout=0.0, **kw)
    return build_classifier(cfg).eval(), cfg


def test_dgsa_follows_the_paper():
    torch.manual_seed(1)
    m = MultiheadDGSA(dim=16, num_heads=2, lambda_init=0.8, qk_residual=False).eval()
    x = torch.randn(3, 5, 16)
    out, maps = m.forward_with_maps(x)
    # gate: sigmoid(w_g x + b_g) per token and head
    g = torch.sigmoid(x @ m.gate_proj.weight.T + m.gate_proj.bias).transpose(1, 2)
    assert torch.allclose(maps["gate"], g, atol=1e-6)
    # fused map rows: g * (rows of A+ sum to 1) - (1 - g) * 1 = 2g - 1
    assert torch.allclose(maps["attention"].sum(-1), 2 * g - 1, atol=1e-5)
    # RMSNorm per head scaled by (1 - lambda_init): with unit weights each head's RMS is
    # 0.2 * rms / sqrt(rms^2 + eps)
    q = m.q_proj(x).view(3, 5, 2, 2, 4).permute(0, 2, 3, 1, 4)
    k = m.k_proj(x).view(3, 5, 2, 2, 4).permute(0, 2, 3, 1, 4)
    v = m.v_proj(x).view(3, 5, 2, 8).transpose(1, 2)
    heads, _, _ = dgsa_reference_maps(q[:, :, 0], k[:, :, 0], q[:, :, 1], k[:, :, 1], v, g)
    normed = m.norm(heads)
    ms = heads.pow(2).mean(-1)
    want = 0.2 * torch.sqrt(ms / (ms + m.norm.eps))
    assert torch.allclose(normed.pow(2).mean(-1).sqrt(), want, atol=1e-6)
    assert want.min() > 0.19
    assert torch.allclose(out, m.out_proj(normed.transpose(1, 2).reshape(3, 5, 16)), atol=1e-6)


def test_fused_path_matches_eager(ops):
    model, _ = small("dgvit")
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        eager = model(x)["logits"]
        model.set_fused(True)
        fused = model(x)["logits"]
    assert torch.allclose(eager, fused, atol=1e-5)


@pytest.mark.parametrize("arch,dar", [("dgvit", False), ("vit", False), ("diffvit", False),
                                      ("vit", True), ("dgvit", True)])
def test_export_round_trip(ops, tmp_path, arch, dar):
    from gatescope.export.classifier import metadata_for
    from gatescope.model_config import METADATA_FILE, metadata_json
    model, cfg = small(arch, dar=dar)
    x = torch.randn(3, 1, 28, 28)
    with torch.no_grad():
        eager = model(x)["logits"]
        eager_maps = model.explain(x)
    model.set_fused(True)
    path = tmp_path / "model.pt"
    meta = metadata_for("m", cfg)
    torch.jit.save(torch.jit.script(model), str(path),
                   _extra_files={METADATA_FILE: metadata_json(meta)})
    extra = {METADATA_FILE: ""}
    loaded = torch.jit.load(str(path), _extra_files=extra)
    assert json.loads(extra[METADATA_FILE]) == meta
    with torch.no_grad():
        assert torch.allclose(loaded(x)["logits"], eager, atol=1e-5)
        maps = loaded.explain(x)
    assert set(maps) == set(meta["maps"]) | {"logits"}
    assert len(maps["attention"]) == cfg.depth
    assert maps["attention"][0].shape == (3, cfg.heads, 17, 17)
    for a, b in zip(maps["attention"], eager_maps["attention"]):
        assert torch.allclose(a, b, atol=1e-6)
    if arch == "dgvit":
        assert maps["gate"][0].shape == (3, cfg.heads, 17)
    fused_op = "dgsa_attention" if arch == "dgvit" and not dar else "dar_attention"
    assert f"gatescope::{fused_op}" in str(loaded.inlined_graph)
    if dar:
        assert maps["resonance"][0].shape == (3, cfg.heads, 17, 17)
        assert maps["vigilance"][0].shape == (3, cfg.heads)
    # The layer-at-a-time contract gives the same maps as explain().
    with torch.no_grad():
        t = loaded.explain_begin(x)
        for layer in range(cfg.depth):
            t, one = loaded.explain_layer(t, layer)
            assert set(one) == set(meta["maps"])
            for kind, m in one.items():
                assert torch.equal(m, maps[kind][layer])
        assert torch.equal(loaded.explain_end(t)["logits"], maps["logits"][0])
        out = loaded(x)
    assert sorted(out) == sorted(meta["outputs"])
    for name in meta["outputs"]:
        assert out[name].shape[0] == 3
        if name != "logits":
            assert out[name].shape == (3, cfg.depth)
