"""PVT-GDLA / PVT-LinearAttn: the public code's parameter layout, the converter round trip
(TorchScript through the fused op vs the eager model), explain maps, the Colin27 split."""
import json

import pytest
import torch

from gatescope.attention.gdla import query_attention_weights
from gatescope.export import convert_gdla
from gatescope.data import colin27
from gatescope.networks.pvt_seg import PvtSegmenter, SegConfig
from gatescope.segmentation import preprocess

B0_HEADS = [1, 2, 5, 8]


def b0(decoder="gdla", **kw):
    torch.manual_seed(0)
    return PvtSegmenter(SegConfig(decoder=decoder, variant="b0", n_classes=5,
                                  n_heads=B0_HEADS, **kw))


def test_public_parameter_names_and_shapes():
    """Defaults are the public PVT-GDLA config (PVT-v2-b2, chs 64/128/320/512, heads
    2/4/10/16, deep supervision); spot-check names and shapes of every part."""
    sd = PvtSegmenter(SegConfig()).state_dict()
    expected = {
        "backbone.patch_embed1.proj.weight": (64, 3, 7, 7),
        "backbone.patch_embed4.norm.bias": (512,),
        "backbone.block1.0.attn.sr.weight": (64, 64, 8, 8),
        "backbone.block1.2.attn.norm.weight": (64,),
        "backbone.block3.5.mlp.dwconv.dwconv.weight": (1280, 1, 3, 3),
        "backbone.block4.2.attn.kv.weight": (1024, 512),
        "backbone.norm4.weight": (512,),
        "up1.up.weight": (512, 320, 3, 3),
        "up3.up.weight": (128, 64, 3, 3),
        "de1.norm1.weight": (320,),
        "de1.dwc.weight": (320, 320, 3, 3),
        "de1.attn.qkvg.weight": (1280, 320),
        "de1.attn.qkvg.bias": (1280,),
        "de1.attn.ln.weight": (32,),
        "de1.attn.dwc.weight": (1280, 1, 3, 3),
        "de1.attn.pwc.weight": (1280, 1280, 1, 1),
        "de1.attn.lambda_scale_main": (10, 32),
        "de1.attn.lambda_scale_aux": (10, 32),
        "de1.attn.out_proj.weight": (320, 640),
        "de1.mlp.pwc1.weight": (2560, 320, 1, 1),
        "de1.mlp.dwc.weight": (2560, 1, 3, 3),
        "de1.mlp.pwc2.weight": (320, 1280, 1, 1),
        "de3.attn.lambda_scale_main": (2, 32),
        "resblk.conv1.weight": (1, 1, 3, 3),
        "resblk.norm1.running_var": (1,),
        "resblk.conv3.weight": (64, 1, 1, 1),
        "resblk.norm3.num_batches_tracked": (),
        "head1.weight": (9, 64, 1, 1),
        "head4.weight": (9, 512, 1, 1),
    }
    for name, shape in expected.items():
        assert tuple(sd[name].shape) == shape, name
    assert "backbone.block4.0.attn.sr.weight" not in sd      # sr_ratio 1 in stage 4
    assert "de1.mlp.pwc2.bias" not in sd and "up1.up.bias" not in sd
    assert sum(k.startswith("backbone.block3.") and k.endswith("norm1.weight") for k in sd) == 6
    la = PvtSegmenter(SegConfig(decoder="la")).state_dict()
    assert tuple(la["de2.attn.qkv.weight"].shape) == (384, 128)
    assert tuple(la["de2.mlp.fc1.weight"].shape) == (512, 128)


def test_non_square_and_deep_supervision_outputs():
    net = b0().eval()
    x = torch.rand(2, 1, 96, 160)
    with torch.no_grad():
        outs = net.forward_all(x)
        assert [tuple(o.shape) for o in outs] == [(2, 5, 96, 160)] * 4
        assert torch.equal(outs[-1], net(x))
    with pytest.raises(ValueError):
        net(torch.rand(1, 1, 100, 96))


def test_gate_option_changes_output_and_defaults_to_sigmoid():
    x = torch.rand(1, 1, 64, 64)
    sig, silu = b0().eval(), b0(gate="silu").eval()
    silu.load_state_dict(sig.state_dict())
    assert SegConfig().gate == "sigmoid" and sig.de1.attn.gate == 0 and silu.de1.attn.gate == 1
    with torch.no_grad():
        assert (sig(x) - silu(x)).abs().max() > 1e-4


def test_fused_op_inside_the_model_matches_eager(ops):
    net = b0().eval()
    x = torch.rand(2, 1, 64, 96)
    with torch.no_grad():
        eager = net(x)
        net.set_fused(True)
        fused = net(x)
    assert (fused - eager).abs().max() < 1e-5


@pytest.mark.parametrize("decoder", ["gdla", "la"])
def test_converter_round_trip(ops, tmp_path, decoder):
    """A random official-layout checkpoint converts to TorchScript whose output equals the
    eager model's to 1e-5, with the settings read from the state dict."""
    net = b0(decoder).eval()
    ckpt = tmp_path / "best.ckpt"
    torch.save({"model_state_dict": net.state_dict(), "epoch": 7}, ckpt)
    labels = ["bg", "a", "b", "c", "d"]
    path, meta, _ = convert_gdla.convert(ckpt, "seg", tmp_path / "repo", labels, (64, 96),
                                         la_heads=B0_HEADS if decoder == "la" else None)
    extra = {"gatescope.json": "", "training.json": ""}
    model = torch.jit.load(str(path), _extra_files=extra)
    stored = json.loads(extra["gatescope.json"])
    assert stored == meta and stored["task"] == "image_segmentation"
    assert stored["input"] == {"shape": [1, 64, 96], "color": "gray",
                               "normalization": "minmax", "any_size": True}
    assert stored["labels"] == labels and json.loads(extra["training.json"]) == {"epoch": 7}
    assert ("gate" in stored["maps"]) == (decoder == "gdla")
    x = preprocess(torch.randint(0, 256, (2, 1, 64, 96), dtype=torch.uint8), (64, 96))
    with torch.no_grad():
        assert (model(x)["logits"] - net(x)).abs().max() < 1e-5
        ref_logits, ref_maps = net.explain(x, 0.4, 0.6)
        state = model.explain_begin(x, [0.4, 0.6])
        for stage in range(3):
            state, maps = model.explain_layer(state, stage)
            for kind, value in maps.items():
                assert (value - ref_maps[f"{kind}.{stage + 1}"]).abs().max() < 1e-6
        assert (model.explain_end(state)["logits"] - ref_logits).abs().max() < 1e-5
        # The served statistic (server: gatescope_gdla_gate_mean) is each stage's gate map
        # averaged over tokens, and only the GDLA decoder has it.
        out = model(x)
    assert sorted(out) == sorted(stored["outputs"])
    if decoder == "gdla":
        assert out["gdla_gate_mean"].shape == (2, 3)
        want = torch.stack([ref_maps[f"gate.{s + 1}"].mean(dim=(1, 2)) for s in range(3)], 1)
        assert (out["gdla_gate_mean"] - want).abs().max() < 1e-5
    else:
        assert stored["outputs"] == ["logits"]


def test_converter_rejects_wrong_labels_and_sizes(tmp_path):
    ckpt = tmp_path / "c.pth"
    torch.save(b0().state_dict(), ckpt)   # a bare state dict is accepted too
    with pytest.raises(ValueError, match="labels"):
        convert_gdla.convert(ckpt, "s", tmp_path, ["a", "b"], (64, 64))
    with pytest.raises(ValueError, match="multiples of 32"):
        convert_gdla.convert(ckpt, "s", tmp_path, list("abcde"), (64, 70))


def test_query_attention_is_a_row_of_the_effective_map():
    """The O(N) query map equals the query's row of the explicit N x N differential map."""
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 3, 50, 8, generator=g), torch.randn(2, 3, 50, 8, generator=g)
    lam = torch.rand(3, 8, generator=g)
    phi = lambda t: torch.nn.functional.elu(t) + 1  # noqa: E731
    full = []
    for lo in (0, 4):
        s = phi(q[..., lo:lo + 4]) @ phi(k[..., lo:lo + 4]).transpose(-2, -1)
        full.append(s / (s.sum(-1, keepdim=True) + 1e-6))
    dense = full[0] - lam.mean(-1).view(1, 3, 1, 1) * full[1]
    assert torch.allclose(query_attention_weights(q, k, lam, 17), dense[:, :, 17], atol=1e-6)


def test_colin27_split_keeps_neighbours_apart():
    data = colin27.load_slices()
    train, test = set(data["train"]["z"].tolist()), set(data["test"]["z"].tolist())
    assert len(train) >= 80 and len(test) >= 25
    assert min(abs(a - b) for a in train for b in test) > colin27.GAP
    labels = data["test"]["labels"]
    assert labels.shape[1:] == (217, 181) and set(labels.ravel().tolist()) == set(range(5))


def test_fused_flag_keeps_gradients_when_training(ops):
    """The op has no backward, so with gradients on the model takes the eager path."""
    net = b0()
    net.set_fused(True)
    net(torch.rand(1, 1, 64, 64)).sum().backward()
    assert net.de1.attn.qkvg.weight.grad.abs().sum() > 0
    assert net.de3.attn.lambda_scale_main.grad.abs().sum() > 0
