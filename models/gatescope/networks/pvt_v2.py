"""PVT-v2 encoder (b0, b1, b2) with the parameter names and shapes of the public PVT-v2
code, so its checkpoints (and PVT-GDLA checkpoints, whose `backbone.*` is this encoder)
load unchanged. Token grids carry explicit H and W, so non-square inputs work.

Forward returns the four stage feature maps [B, C_i, H/2^(i+1), W/2^(i+1)], i = 1..4.
"""
import math
from dataclasses import dataclass
from typing import List, Tuple

import torch
from torch import nn


@dataclass(frozen=True)
class PvtV2Variant:
    embed_dims: Tuple[int, int, int, int]
    depths: Tuple[int, int, int, int]
    num_heads: Tuple[int, int, int, int] = (1, 2, 5, 8)
    mlp_ratios: Tuple[int, int, int, int] = (8, 8, 4, 4)
    sr_ratios: Tuple[int, int, int, int] = (8, 4, 2, 1)


VARIANTS = {
    "b0": PvtV2Variant(embed_dims=(32, 64, 160, 256), depths=(2, 2, 2, 2)),
    "b1": PvtV2Variant(embed_dims=(64, 128, 320, 512), depths=(2, 2, 2, 2)),
    "b2": PvtV2Variant(embed_dims=(64, 128, 320, 512), depths=(3, 4, 6, 3)),
}
BLOCK_NORM_EPS = 1e-6


class DropPath(nn.Module):
    """Stochastic depth on the residual branch (identity in eval mode)."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
        return x * mask / keep


class DWConv(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 3, 1, 1, bias=True, groups=dim)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        b, n, c = x.shape
        x = self.dwconv(x.transpose(1, 2).reshape(b, c, h, w))
        return x.flatten(2).transpose(1, 2)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.dwconv = DWConv(hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        return self.fc2(self.act(self.dwconv(self.fc1(x), h, w)))


class SpatialReductionAttention(nn.Module):
    """Softmax attention whose keys/values come from a grid downsampled by sr_ratio."""

    def __init__(self, dim: int, num_heads: int, sr_ratio: int):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.q = nn.Linear(dim, dim, bias=True)
        self.kv = nn.Linear(dim, 2 * dim, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.sr_ratio = sr_ratio
        if sr_ratio > 1:
            self.sr = nn.Conv2d(dim, dim, kernel_size=sr_ratio, stride=sr_ratio)
            self.norm = nn.LayerNorm(dim)
        else:
            self.sr = nn.Identity()
            self.norm = nn.Identity()

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        b, n, c = x.shape
        hd = c // self.num_heads
        q = self.q(x).reshape(b, n, self.num_heads, hd).permute(0, 2, 1, 3)
        src = x
        if self.sr_ratio > 1:
            src = self.sr(x.transpose(1, 2).reshape(b, c, h, w)).flatten(2).transpose(1, 2)
            src = self.norm(src)
        kv = self.kv(src).reshape(b, -1, 2, self.num_heads, hd).permute(2, 0, 3, 1, 4)
        attn = ((q @ kv[0].transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ kv[1]).transpose(1, 2).reshape(b, n, c))


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: int, sr_ratio: int,
                 drop_path: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=BLOCK_NORM_EPS)
        self.attn = SpatialReductionAttention(dim, num_heads, sr_ratio)
        self.drop_path = DropPath(drop_path)
        self.norm2 = nn.LayerNorm(dim, eps=BLOCK_NORM_EPS)
        self.mlp = Mlp(dim, dim * mlp_ratio)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), h, w))
        return x + self.drop_path(self.mlp(self.norm2(x), h, w))


class OverlapPatchEmbed(nn.Module):
    def __init__(self, patch: int, stride: int, in_chans: int, dim: int):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch, stride=stride,
                              padding=patch // 2)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, int, int]:
        x = self.proj(x)
        h, w = x.shape[2], x.shape[3]
        return self.norm(x.flatten(2).transpose(1, 2)), h, w


class PvtV2Encoder(nn.Module):
    def __init__(self, variant: str = "b2", in_chans: int = 3, drop_path_rate: float = 0.1):
        super().__init__()
        spec = VARIANTS[variant]
        dims = spec.embed_dims
        rates = torch.linspace(0, drop_path_rate, sum(spec.depths)).tolist()
        self.patch_embed1 = OverlapPatchEmbed(7, 4, in_chans, dims[0])
        self.patch_embed2 = OverlapPatchEmbed(3, 2, dims[0], dims[1])
        self.patch_embed3 = OverlapPatchEmbed(3, 2, dims[1], dims[2])
        self.patch_embed4 = OverlapPatchEmbed(3, 2, dims[2], dims[3])
        blocks: List[nn.ModuleList] = []
        cur = 0
        for i in range(4):
            blocks.append(nn.ModuleList([
                Block(dims[i], spec.num_heads[i], spec.mlp_ratios[i], spec.sr_ratios[i],
                      rates[cur + j]) for j in range(spec.depths[i])]))
            cur += spec.depths[i]
        self.block1, self.block2, self.block3, self.block4 = blocks
        self.norm1 = nn.LayerNorm(dims[0], eps=BLOCK_NORM_EPS)
        self.norm2 = nn.LayerNorm(dims[1], eps=BLOCK_NORM_EPS)
        self.norm3 = nn.LayerNorm(dims[2], eps=BLOCK_NORM_EPS)
        self.norm4 = nn.LayerNorm(dims[3], eps=BLOCK_NORM_EPS)
        self.apply(init_pvt_weights)

    @staticmethod
    def _grid(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        return x.reshape(x.shape[0], h, w, -1).permute(0, 3, 1, 2).contiguous()

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        # Written out per stage: TorchScript cannot pass submodules as arguments.
        x, h, w = self.patch_embed1(x)
        for blk in self.block1:
            x = blk(x, h, w)
        x1 = self._grid(self.norm1(x), h, w)
        x, h, w = self.patch_embed2(x1)
        for blk in self.block2:
            x = blk(x, h, w)
        x2 = self._grid(self.norm2(x), h, w)
        x, h, w = self.patch_embed3(x2)
        for blk in self.block3:
            x = blk(x, h, w)
        x3 = self._grid(self.norm3(x), h, w)
        x, h, w = self.patch_embed4(x3)
        for blk in self.block4:
            x = blk(x, h, w)
        return [x1, x2, x3, self._grid(self.norm4(x), h, w)]


def init_pvt_weights(m: nn.Module) -> None:
    """The public PVT-v2 initialisation: truncated-normal linears, fan-out convs."""
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Conv2d):
        fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
        nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
        if m.bias is not None:
            nn.init.zeros_(m.bias)
