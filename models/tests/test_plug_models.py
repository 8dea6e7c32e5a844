"""PLuG-DeiT: timm parameter names, a plain DeiT checkpoint loads with the gate off and
computes exactly the same, the gate trains from its initial state, the fused op inside the
model equals the eager path, and the explain maps are the reference's."""
import pytest
import torch

from gatescope.attention.plug import plug_gate
from gatescope.networks import VitConfig, build_classifier

CFG = dict(patch_size=7, dim=64, depth=4, heads=4)


def model(arch, seed=0):
    torch.manual_seed(seed)
    return build_classifier(VitConfig(arch=arch, **CFG)).eval()


def test_timm_names_and_plain_checkpoint_loads_with_the_gate_off():
    plain, plug = model("deit"), model("plug_deit", seed=1)
    names = set(plain.state_dict())
    for expected in ("cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.0.norm1.weight",
                     "blocks.3.attn.qkv.weight", "blocks.3.attn.proj.bias",
                     "blocks.1.mlp.fc1.weight", "blocks.1.mlp.fc2.bias", "norm.weight",
                     "head.weight"):
        assert expected in names
    result = plug.load_state_dict(plain.state_dict(), strict=False)
    assert result.unexpected_keys == []
    assert sorted({k.split(".", 3)[3] for k in result.missing_keys}) == [
        "gml.bias", "gml.weight", "k_gate.bias", "k_gate.weight", "q_gate.bias", "q_gate.weight"]
    x = torch.randn(5, 1, 28, 28)
    with torch.no_grad():
        assert torch.equal(plain(x)["logits"], plug(x)["logits"])
        maps = plug.explain(x)
    assert all(float(g.abs().max()) == 0.0 for g in maps["plug_gate"])


def test_gate_starts_off_but_trains():
    net = model("plug_deit")
    net.train()
    loss = net(torch.randn(4, 1, 28, 28))["logits"].logsumexp(-1).sum()
    loss.backward()
    attn = net.blocks[0].attn
    assert attn.gml.weight.grad[0].abs().sum() > 0 and attn.gml.bias.grad[0].abs() > 0


def test_explain_gate_rows_equal_the_reference():
    net = model("plug_deit")
    with torch.no_grad():
        for blk in net.blocks:
            blk.attn.gml.weight.normal_()
            blk.attn.gml.bias.normal_()
        x = torch.randn(2, 1, 28, 28)
        maps = net.explain(x)
        t = net.explain_begin(x)
        blk = net.blocks[0]
        xn = blk.norm1(t)
        g = plug_gate(blk.attn.q_gate(xn), blk.attn.k_gate(xn), blk.attn.gml.weight,
                      blk.attn.gml.bias, blk.attn.gate_scale)
    assert maps["plug_gate"][0].shape == (2, 17, 17)
    assert torch.allclose(maps["plug_gate"][0], g, atol=1e-6)
    assert float(g.abs().max()) < 1.0 and float(g.abs().max()) > 0.0
    assert torch.allclose(maps["attention"][0].sum(-1), torch.ones(2, 4, 17), atol=1e-5)


@pytest.mark.parametrize("arch", ["deit", "plug_deit"])
def test_fused_ops_inside_the_model_match_eager(ops, arch):
    net = model(arch)
    with torch.no_grad():
        for blk in net.blocks:
            if arch == "plug_deit":
                blk.attn.gml.weight.normal_()
                blk.attn.gml.bias.normal_()
        x = torch.randn(3, 1, 28, 28)
        eager = net(x)["logits"]
        net.set_fused(True)
        fused = net(x)["logits"]
        scripted = torch.jit.script(net)(x)["logits"]
    assert (fused - eager).abs().max() < 1e-5
    assert (scripted - eager).abs().max() < 1e-5


def test_served_scale_is_one_plus_the_mean_gate_of_each_layer(ops):
    """forward()'s plug_scale_mean (served as gatescope_plug_scale_mean) is 1 + the mean of
    each layer's explain map G, eager and scripted through the fused op; plain DeiT has none."""
    net = model("plug_deit")
    with torch.no_grad():
        for blk in net.blocks:
            blk.attn.gml.weight.normal_()
            blk.attn.gml.bias.normal_()
        x = torch.randn(3, 1, 28, 28)
        want = 1.0 + torch.stack([g.mean(dim=(1, 2)) for g in net.explain(x)["plug_gate"]], 1)
        eager = net(x)["plug_scale_mean"]
        net.set_fused(True)
        scripted = torch.jit.script(net)(x)
        plain = torch.jit.script(model("deit"))(x)
    assert want.shape == (3, 4) and float((want - 1.0).abs().max()) > 0.0
    assert torch.allclose(eager, want, atol=1e-6)
    assert torch.allclose(scripted["plug_scale_mean"], want, atol=1e-5)
    assert sorted(plain) == ["logits"]
