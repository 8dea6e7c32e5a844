"""Plain multi-head self-attention (the ViT baseline), with the same map interface as M-DGSA."""
import math
from typing import Dict, Tuple

import torch
from torch import nn


class MultiheadSelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError("dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)

    def _attend(self, x):
        b, n, _ = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim), -1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, n, -1)
        return self.out_proj(out), attn

    def forward(self, x):
        return self._attend(x)[0]

    def forward_with_maps(self, x) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        out, attn = self._attend(x)
        return out, {"attention": attn}
