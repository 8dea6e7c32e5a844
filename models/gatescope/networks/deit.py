"""DeiT-style ViT (timm parameter names) with optional PLuG attention: `deit` is the plain
model, `plug_deit` adds the pairwise logit gate in every block. The gate starts off (G = 0),
so a plain timm/DeiT checkpoint loads into PLuG-DeiT with `strict=False` (only the gate
parameters are missing) and computes exactly what it did.

Names: patch_embed.proj, cls_token, pos_embed, blocks.i.{norm1, attn.{qkv, proj, q_gate,
k_gate, gml}, norm2, mlp.{fc1, fc2}}, norm, head. LayerNorm eps 1e-6 and GELU MLP as timm.
Same model contract as gatescope.networks.vit (forward, explain_begin/layer/end, explain);
PLuG layers' maps add plug_gate [B, N, N], the head-shared gate G, and PLuG-DeiT's forward
adds the per-layer statistic "plug_scale_mean" [B, L] (the mean logit scale 1 + G).
"""
from typing import Dict, List, Tuple

import torch
from torch import nn

from gatescope.networks.layerwise import LayerwiseExplain

from gatescope.attention.fused import set_fused
from gatescope.attention.plug import PlugAttention

NORM_EPS = 1e-6


class PatchEmbed(nn.Module):
    def __init__(self, in_channels: int, dim: int, patch: int):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, dim, patch, patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class DeitBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float, dropout: float, plug: bool):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=NORM_EPS)
        self.attn = PlugAttention(dim, heads, gated=plug)
        self.norm2 = nn.LayerNorm(dim, eps=NORM_EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        out, stats = self.attn(self.norm1(x))
        x = x + self.drop(out)
        return x + self.mlp(self.norm2(x)), stats

    def forward_with_maps(self, x: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        out, maps = self.attn.forward_with_maps(self.norm1(x))
        x = x + self.drop(out)
        return x + self.mlp(self.norm2(x)), maps


class Deit(LayerwiseExplain):
    def __init__(self, cfg):
        super().__init__()
        if cfg.image_size % cfg.patch_size != 0:
            raise ValueError("image_size must be a multiple of patch_size")
        plug = cfg.arch == "plug_deit"
        self.grid = cfg.image_size // cfg.patch_size
        self.patch_embed = PatchEmbed(cfg.in_channels, cfg.dim, cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.randn(1, self.grid * self.grid + 1, cfg.dim) * 0.02)
        self.pos_drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([DeitBlock(cfg.dim, cfg.heads, cfg.mlp_ratio, cfg.dropout,
                                               plug) for _ in range(cfg.depth)])
        self.norm = nn.LayerNorm(cfg.dim, eps=NORM_EPS)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)

    def set_fused(self, enabled: bool):
        """use_fused on every attention (gatescope.attention.fused)."""
        set_fused(self, enabled)

    def _tokens(self, x: torch.Tensor) -> torch.Tensor:
        t = self.patch_embed(x)
        cls = self.cls_token.expand(t.shape[0], -1, -1)
        return self.pos_drop(torch.cat([cls, t], dim=1) + self.pos_embed)

    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        """{"logits" [B, classes]} and, for PLuG-DeiT, "plug_scale_mean" [B, L] (per layer,
        the mean over query-key pairs of the logit scale 1 + G)."""
        t = self._tokens(x)
        per_layer: List[torch.Tensor] = []
        for blk in self.blocks:
            t, stats = blk(t)
            if "plug_scale_mean" in stats:
                per_layer.append(stats["plug_scale_mean"])
        out = {"logits": self.head(self.norm(t)[:, 0])}
        if len(per_layer) > 0:
            out["plug_scale_mean"] = torch.stack(per_layer, dim=1)
        return out
