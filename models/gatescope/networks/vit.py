"""ViT, DGViT and DiffAttn-ViT image classifiers sharing one backbone; only the attention
differs, and each may add the DAR resonance prior (`dar`).

All follow the DGSA paper's recipe: learnable class token and position embedding,
pre-norm blocks, SwiGLU feed-forward. DGViT uses M-DGSA with its inner [Q+;Q-] residual.

Model contract (TorchScript):
  forward(x) -> {"logits" [B, classes], and per-layer statistics [B, L]: "gate_mean"
                 (M-DGSA) and "vigilance_mean" (DAR)}; predict stays on the fused ops.
  explain_begin(x) -> tokens; explain_layer(tokens, l) -> (tokens, maps of layer l);
  explain_end(tokens) -> {"logits"}: layer-at-a-time maps, so a caller holds one layer's
  maps at a time. explain(x) -> every layer's maps at once (for Python tools).
"""
import dataclasses
from typing import Dict, List, Optional, Tuple

import torch
from torch import nn
import torch.nn.functional as F

from gatescope.attention import (DarParams, MultiheadDGSA, MultiheadDiffAttn,
                                 MultiheadSelfAttention)
from gatescope.attention.fused import set_fused
from gatescope.networks.layerwise import LayerwiseExplain

ARCHS = ("dgvit", "vit", "diffvit", "deit", "plug_deit")


@dataclasses.dataclass
class VitConfig:
    arch: str = "dgvit"          # "dgvit", "vit", "diffvit" or (networks/deit.py) "deit", "plug_deit"
    image_size: int = 28
    in_channels: int = 1
    patch_size: int = 4
    dim: int = 64
    depth: int = 4
    heads: int = 4
    mlp_ratio: float = 4.0
    dropout: float = 0.05
    num_classes: int = 10
    lambda_init: float = 0.8     # M-DGSA's output scale (1 - lambda_init)
    dar: bool = False            # add the DAR prior to every attention logit
    dar_lambda: float = 0.4
    dar_rho: float = 0.5
    dar_alpha: float = 8.0
    dar_beta: float = 0.0
    dar_steps: int = 1

    def dar_params(self) -> Optional[DarParams]:
        if not self.dar:
            return None
        return DarParams(self.dar_lambda, self.dar_rho, self.dar_alpha, self.dar_beta,
                         self.dar_steps)


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__()
        self.w_in = nn.Linear(dim, 2 * hidden)
        self.w_out = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        a, b = self.w_in(x).chunk(2, dim=-1)
        return self.w_out(self.drop(F.silu(a) * b))


def make_attention(cfg: VitConfig, layer_index: int) -> nn.Module:
    dar = cfg.dar_params()
    if cfg.arch == "dgvit":
        return MultiheadDGSA(cfg.dim, cfg.heads, cfg.lambda_init, qk_residual=True, dar=dar)
    if cfg.arch == "vit":
        return MultiheadSelfAttention(cfg.dim, cfg.heads, dar=dar)
    if cfg.arch == "diffvit":
        return MultiheadDiffAttn(cfg.dim, cfg.heads, layer_index, dar=dar)
    raise ValueError(f"unknown arch {cfg.arch}")


class Block(nn.Module):
    def __init__(self, cfg: VitConfig, layer_index: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.attn = make_attention(cfg, layer_index)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.ffn = SwiGLU(cfg.dim, int(cfg.dim * cfg.mlp_ratio), cfg.dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        out, stats = self.attn(self.norm1(x))
        x = x + self.drop(out)
        return x + self.drop(self.ffn(self.norm2(x))), stats

    def forward_with_maps(self, x):
        out, maps = self.attn.forward_with_maps(self.norm1(x))
        x = x + self.drop(out)
        return x + self.drop(self.ffn(self.norm2(x))), maps


class VisionTransformer(LayerwiseExplain):
    def __init__(self, cfg: VitConfig):
        super().__init__()
        if cfg.image_size % cfg.patch_size != 0:
            raise ValueError("image_size must be a multiple of patch_size")
        self.grid = cfg.image_size // cfg.patch_size
        self.patch_embed = nn.Conv2d(cfg.in_channels, cfg.dim, cfg.patch_size, cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.randn(1, self.grid * self.grid + 1, cfg.dim) * 0.02)
        self.blocks = nn.ModuleList([Block(cfg, i) for i in range(cfg.depth)])
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)
        self.drop = nn.Dropout(cfg.dropout)

    def set_fused(self, enabled: bool):
        """use_fused on every attention: forward() runs the op library's kernels while
        gradients are off (gatescope.attention.fused)."""
        set_fused(self, enabled)

    def _tokens(self, x):
        t = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(t.shape[0], -1, -1)
        return self.drop(torch.cat([cls, t], dim=1) + self.pos_embed)

    def forward(self, x) -> Dict[str, torch.Tensor]:
        t = self._tokens(x)
        per_layer: Dict[str, List[torch.Tensor]] = {}
        for blk in self.blocks:
            t, stats = blk(t)
            for name, value in stats.items():
                if name not in per_layer:
                    per_layer[name] = []
                per_layer[name].append(value)
        out = {"logits": self.head(self.norm(t)[:, 0])}
        for name, values in per_layer.items():
            out[name] = torch.stack(values, dim=1)
        return out


def build_classifier(cfg: VitConfig) -> nn.Module:
    if cfg.arch in ("deit", "plug_deit"):
        if cfg.dar:
            raise ValueError("DAR is not offered on the DeiT models")
        from gatescope.networks.deit import Deit
        return Deit(cfg)
    return VisionTransformer(cfg)
