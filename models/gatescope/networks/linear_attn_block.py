"""The linear-attention decoder block of the PVT-LinearAttn baseline (public names):
multi-head ELU+1 linear attention and a GELU MLP, pre-norm residuals. The explain() maps
match the GDLA block's: `attention` is one query token's weights over all tokens (O(N));
there is no gate, so `gate` is all ones."""
from typing import Dict, Tuple

import torch
from torch import nn

from gatescope.attention.gdla import LINEAR_EPS, elu_feature
from gatescope.networks.seg_blocks import Mlp


class MultiHeadLinearAttn(nn.Module):
    def __init__(self, dim: int, n_heads: int, qkv_bias: bool = True):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.out_proj = nn.Linear(dim, dim, bias=True)

    def _features(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return elu_feature(qkv[0]), elu_feature(qkv[1]), qkv[2]

    def forward(self, x: torch.Tensor, den_eps: float = LINEAR_EPS) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self._features(x)
        z = 1.0 / (q @ k.sum(dim=-2, keepdim=True).transpose(-2, -1) + den_eps)
        y = (q @ (k.transpose(-2, -1) @ v)) * z
        return self.out_proj(y.transpose(1, 2).reshape(b, n, c))

    def query_weights(self, x: torch.Tensor, query: int,
                      den_eps: float = LINEAR_EPS) -> torch.Tensor:
        q, k, _ = self._features(x)
        s = (k * q[:, :, query].unsqueeze(-2)).sum(dim=-1)
        return (s / (s.sum(dim=-1, keepdim=True) + den_eps)).mean(dim=1)


class MHLA(nn.Module):
    def __init__(self, dim: int, n_heads: int, qkv_bias: bool = True, norm_eps: float = 1e-5,
                 hidden_ratio: float = 4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = MultiHeadLinearAttn(dim, n_heads, qkv_bias)
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(hidden_ratio * dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        t = x.reshape(b, c, h * w).transpose(1, 2)
        t = t + self.attn(self.norm1(t))
        t = t + self.mlp(self.norm2(t), h, w)
        return t.reshape(b, h, w, c).permute(0, 3, 1, 2)

    def explain(self, x: torch.Tensor, query: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        b, c, h, w = x.shape
        t = x.reshape(b, c, h * w).transpose(1, 2)
        attention = self.attn.query_weights(self.norm1(t), query)
        maps = {"gate": torch.ones_like(attention), "attention": attention}
        return self.forward(x), maps
