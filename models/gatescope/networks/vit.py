"""ViT and DGViT image classifiers sharing one backbone; only the attention differs.

Both follow the DGSA paper's recipe: learnable class token and position embedding,
pre-norm blocks, SwiGLU feed-forward. DGViT uses M-DGSA with its inner [Q+;Q-] residual.
Model contract (TorchScript): forward(x) -> {"logits"}; explain(x) -> per-layer maps.
"""
import dataclasses
from typing import Dict, List

import torch
from torch import nn
import torch.nn.functional as F

from gatescope.attention import MultiheadDGSA, MultiheadSelfAttention


@dataclasses.dataclass
class VitConfig:
    arch: str = "dgvit"          # "dgvit" or "vit"
    image_size: int = 28
    in_channels: int = 1
    patch_size: int = 4
    dim: int = 64
    depth: int = 4
    heads: int = 4
    mlp_ratio: float = 4.0
    dropout: float = 0.05
    num_classes: int = 10
    lambda_init: float = 0.8


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__()
        self.w_in = nn.Linear(dim, 2 * hidden)
        self.w_out = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        a, b = self.w_in(x).chunk(2, dim=-1)
        return self.w_out(self.drop(F.silu(a) * b))


class Block(nn.Module):
    def __init__(self, cfg: VitConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim)
        if cfg.arch == "dgvit":
            self.attn = MultiheadDGSA(cfg.dim, cfg.heads, cfg.lambda_init, qk_residual=True)
        elif cfg.arch == "vit":
            self.attn = MultiheadSelfAttention(cfg.dim, cfg.heads)
        else:
            raise ValueError(f"unknown arch {cfg.arch}")
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.ffn = SwiGLU(cfg.dim, int(cfg.dim * cfg.mlp_ratio), cfg.dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.norm1(x)))
        return x + self.drop(self.ffn(self.norm2(x)))

    def forward_with_maps(self, x):
        out, maps = self.attn.forward_with_maps(self.norm1(x))
        x = x + self.drop(out)
        return x + self.drop(self.ffn(self.norm2(x))), maps


class VisionTransformer(nn.Module):
    def __init__(self, cfg: VitConfig):
        super().__init__()
        if cfg.image_size % cfg.patch_size != 0:
            raise ValueError("image_size must be a multiple of patch_size")
        self.grid = cfg.image_size // cfg.patch_size
        self.patch_embed = nn.Conv2d(cfg.in_channels, cfg.dim, cfg.patch_size, cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.randn(1, self.grid * self.grid + 1, cfg.dim) * 0.02)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.depth)])
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)
        self.drop = nn.Dropout(cfg.dropout)

    def set_fused(self, enabled: bool):
        """Routes M-DGSA forward() through the op library (inference only)."""
        for blk in self.blocks:
            if isinstance(blk.attn, MultiheadDGSA):
                blk.attn.use_fused = enabled

    def _tokens(self, x):
        t = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(t.shape[0], -1, -1)
        return self.drop(torch.cat([cls, t], dim=1) + self.pos_embed)

    def forward(self, x) -> Dict[str, torch.Tensor]:
        t = self._tokens(x)
        for blk in self.blocks:
            t = blk(t)
        return {"logits": self.head(self.norm(t)[:, 0])}

    @torch.jit.export
    def explain(self, x) -> Dict[str, List[torch.Tensor]]:
        """Per-layer maps: attention [B,H,N,N] (fused A for DGViT), gate [B,H,N] (DGViT)."""
        t = self._tokens(x)
        out: Dict[str, List[torch.Tensor]] = {}
        for blk in self.blocks:
            t, maps = blk.forward_with_maps(t)
            for name, m in maps.items():
                if name not in out:
                    out[name] = []
                out[name].append(m)
        out["logits"] = [self.head(self.norm(t)[:, 0])]
        return out


def build_classifier(cfg: VitConfig) -> VisionTransformer:
    return VisionTransformer(cfg)
