"""Plain multi-head self-attention (the ViT baseline), optionally with the DAR prior, with
the same map interface as M-DGSA.

forward(x, key_mask=None) -> (out, stats): stats holds per-example summaries
("vigilance_mean": the DAR vigilance-crossing fraction averaged over heads, [B]) that the
server turns into metrics. key_mask: optional bool [B, N], True = visible key (padding
False); hidden keys get attention weight 0 on both the eager and the fused path (the op's
key_padding_mask). Without it the computation is the unmasked one, unchanged.
"""
from typing import Dict, Optional, Tuple

import torch
from torch import nn

from gatescope.attention.dar import DarParams
from gatescope.attention.dar_settings import DarSettings
from gatescope.attention.fused import fused_active
from gatescope.attention.softmax_maps import fused_attention, softmax_map


class MultiheadSelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, dar: Optional[DarParams] = None,
                 use_fused: bool = False):
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError("dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)
        self.dar = DarSettings(dar)
        self.use_fused = use_fused

    def _qkv(self, x):
        b, n, _ = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return qkv[0], qkv[1], qkv[2]

    def _finish(self, heads, b: int, n: int):
        return self.out_proj(heads.transpose(1, 2).reshape(b, n, -1))

    def forward(self, x, key_mask: Optional[torch.Tensor] = None
                ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        b, n, _ = x.shape
        q, k, v = self._qkv(x)
        d = self.dar
        stats: Dict[str, torch.Tensor] = {}
        if fused_active(self.use_fused):
            heads, crossing = fused_attention(q.contiguous(), k.contiguous(), v.contiguous(),
                                              d.enabled, d.lam, d.rho, d.alpha, d.beta, d.steps,
                                              key_mask)
            if d.enabled:
                stats["vigilance_mean"] = crossing.mean(-1)
        else:
            attn, _r, crossing = softmax_map(q, k, d.enabled, d.lam, d.rho, d.alpha, d.beta,
                                            d.steps, key_mask)
            heads = torch.matmul(attn, v)
            if crossing is not None:
                stats["vigilance_mean"] = crossing.mean(-1)
        return self._finish(heads, b, n), stats

    def forward_with_maps(self, x, key_mask: Optional[torch.Tensor] = None
                          ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Eager maps: attention [B,H,N,N] (0 at hidden keys); with DAR also resonance
        [B,H,N,N] and vigilance [B,H]."""
        b, n, _ = x.shape
        q, k, v = self._qkv(x)
        d = self.dar
        attn, r, crossing = softmax_map(q, k, d.enabled, d.lam, d.rho, d.alpha, d.beta, d.steps,
                                        key_mask)
        maps: Dict[str, torch.Tensor] = {"attention": attn}
        if r is not None and crossing is not None:
            maps["resonance"] = r
            maps["vigilance"] = crossing
        return self._finish(torch.matmul(attn, v), b, n), maps
