"""Converts a PVT-GDLA / PVT-LinearAttn checkpoint in the public code's layout into a
self-describing gatescope TorchScript model.

The checkpoint is a dict with `model_state_dict` (the public training code's format, also
written by models/train_segmenter.py) or a bare state dict. Everything the state dict
determines is read from it: decoder kind (de1.attn.qkvg -> GDLA, de1.attn.qkv -> linear
attention), PVT-v2 size (b0/b1/b2 from widths and depths), input channels, class count,
deep-supervision heads and, for GDLA, the decoder head counts (lambda_scale_main rows).
What it cannot determine is asked for: class names, model input size (H and W multiples
of 32; non-square allowed), the gate function (`sigmoid`, the public code's default, or
`silu`, the paper's) and, for linear attention, the decoder head counts. The public
code's optional RoPE for the linear-attention baseline keeps no parameters, so it cannot be
detected; such checkpoints are not supported (they would convert without RoPE).

Writes <repo>/<name>/<version>/model.pt with `gatescope.json` (task image_segmentation,
labels, input shape/colour, per-image min-max normalisation, any_size: inputs of any size
are resized to the model's and the class map returned at the input's size) and the
checkpoint's training record as `training.json` when it has one.

Usage: /usr/bin/python3 models/convert_gdla.py --ckpt best.ckpt --name pvt_gdla_synapse \
           --labels background,aorta,... --input-size 224 224 [--gate sigmoid]
"""
import argparse
from typing import Dict, List, Optional, Tuple

import torch

from gatescope import ops, paths
from gatescope.export.archive import save_model
from gatescope.networks.pvt_seg import PvtSegmenter, SegConfig
from gatescope.networks.pvt_v2 import VARIANTS
from gatescope.served_segmenter import ServedSegmenter

ARCHS = {"gdla": "pvt_gdla", "la": "pvt_linear_attn"}


def state_dict_of(ckpt) -> Dict[str, torch.Tensor]:
    if isinstance(ckpt, dict) and "model_state_dict" in ckpt:
        return ckpt["model_state_dict"]
    if isinstance(ckpt, dict) and all(isinstance(v, torch.Tensor) for v in ckpt.values()):
        return ckpt
    raise ValueError("checkpoint has no model_state_dict and is not a state dict")


def infer_config(sd: Dict[str, torch.Tensor], gate: str,
                 la_heads: Optional[List[int]]) -> SegConfig:
    if "de1.attn.qkvg.weight" in sd:
        decoder = "gdla"
        heads = [int(sd[f"de{i}.attn.lambda_scale_main"].shape[0]) for i in (3, 2, 1)]
        heads.append(0)
    elif "de1.attn.qkv.weight" in sd:
        decoder = "la"
        if not la_heads:
            raise ValueError("linear-attention checkpoints need --heads (4 values)")
        heads = la_heads
    else:
        raise ValueError("not a PVT-GDLA / PVT-LinearAttn state dict (no de1.attn)")
    widths = tuple(int(sd[f"backbone.patch_embed{i}.proj.weight"].shape[0]) for i in (1, 2, 3, 4))
    depths = tuple(1 + max(int(k.split(".")[2]) for k in sd if k.startswith(f"backbone.block{i}."))
                   for i in (1, 2, 3, 4))
    variant = next((name for name, v in VARIANTS.items()
                    if v.embed_dims == widths and v.depths == depths), None)
    if variant is None:
        raise ValueError(f"unknown PVT-v2 size: widths {widths}, depths {depths}")
    return SegConfig(decoder=decoder, variant=variant,
                     in_chs=int(sd["resblk.conv1.weight"].shape[1]),
                     n_classes=int(sd["head1.weight"].shape[0]), n_heads=heads, gate=gate,
                     deep_supervision="head2.weight" in sd, drop_path_rate=0.0)


def metadata(name: str, cfg: SegConfig, labels: List[str], size: Tuple[int, int]) -> Dict:
    return {
        "name": name, "task": "image_segmentation", "arch": ARCHS[cfg.decoder],
        "input": {"shape": [cfg.in_chs, size[0], size[1]],
                  "color": "gray" if cfg.in_chs == 1 else "rgb",
                  "normalization": "minmax", "any_size": True},
        "labels": labels,
        "outputs": ["logits", "gdla_gate_mean"] if cfg.decoder == "gdla" else ["logits"],
        "maps": ["attention", "gate"] if cfg.decoder == "gdla" else ["attention"],
        "required_ops": ["gatescope"], "max_batch_size": 16, "layers": 3,
        "heads": cfg.n_heads[0],
    }


def convert(ckpt_path, name: str, repo, labels: List[str], size: Tuple[int, int],
            gate: str = "sigmoid", la_heads: Optional[List[int]] = None, version: str = "1"):
    """Returns (model.pt path, metadata, eager network in eval mode)."""
    if size[0] % 32 or size[1] % 32:
        raise ValueError("--input-size values must be multiples of 32")
    ckpt = torch.load(str(ckpt_path), map_location="cpu")
    sd = state_dict_of(ckpt)
    cfg = infer_config(sd, gate, la_heads)
    if len(labels) != cfg.n_classes:
        raise ValueError(f"{len(labels)} labels given, the checkpoint has {cfg.n_classes} classes")
    net = PvtSegmenter(cfg)
    net.load_state_dict(sd, strict=True)
    net.eval()
    if cfg.decoder == "gdla":
        ops.load()
        net.set_fused(True)
    scripted = torch.jit.script(ServedSegmenter(net))
    meta = metadata(name, cfg, labels, size)
    record = {k: v for k, v in ckpt.items() if k != "model_state_dict"} \
        if isinstance(ckpt, dict) and "model_state_dict" in ckpt else {}
    path = save_model(scripted, repo, name, version, meta, record)
    return path, meta, net


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--repo", default=str(paths.CHECKOUT / "model_repository"))
    ap.add_argument("--version", default="1")
    ap.add_argument("--labels", help="comma-separated class names (default: the checkpoint's)")
    ap.add_argument("--input-size", type=int, nargs=2, metavar=("H", "W"))
    ap.add_argument("--gate", choices=["sigmoid", "silu", "none"], default=None)
    ap.add_argument("--heads", type=int, nargs=4, help="decoder heads (linear attention only)")
    args = ap.parse_args(argv)
    ckpt = torch.load(args.ckpt, map_location="cpu")
    saved = ckpt.get("config", {}) if isinstance(ckpt, dict) else {}
    labels = args.labels.split(",") if args.labels else ckpt.get("class_names")
    size = tuple(args.input_size) if args.input_size else tuple(ckpt.get("input_size", ()))
    if not labels or len(size) != 2:
        ap.error("--labels and --input-size are needed for checkpoints that do not carry them")
    path, _, _ = convert(args.ckpt, args.name, args.repo, labels, size,
                         args.gate or saved.get("gate", "sigmoid"),
                         args.heads or saved.get("n_heads"), args.version)
    print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0
