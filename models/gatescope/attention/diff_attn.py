"""Multi-head differential attention (the Differential Transformer), the baseline DGSA
refines: per head
    A = softmax(Q1 K1^T / sqrt(d)) - lambda softmax(Q2 K2^T / sqrt(d)),   H_h = A V_h
with one learned scalar per layer lambda = exp(lq1.lk1) - exp(lq2.lk2) + lambda_init and
lambda_init = 0.8 - 0.6 exp(-0.3 * layer_index) (layer_index from 0), then a per-head
RMSNorm times (1 - lambda_init), concatenation and W_O. The per-head norm weight (instead
of one weight shared by all heads) matches gatescope's M-DGSA so the two differ only in
how the branches are mixed (scalar lambda vs per-token sigmoid gate).

DAR, when enabled, adds its prior to both branches' logits. The fused path runs
gatescope.dar_attention once per branch (no N x N map) when use_fused is set and gradients
are off (gatescope.attention.fused).

forward(x, key_mask=None) / forward_with_maps(x, key_mask=None): key_mask is an optional
bool [B, N], True = visible key; hidden keys get weight 0 in both branches (eager: -inf
logits; fused: the op's key_padding_mask). Without it nothing changes.
"""
import math
from typing import Dict, Optional, Tuple

import torch
from torch import nn

from gatescope.attention.dar import DarParams
from gatescope.attention.dar_settings import DarSettings
from gatescope.attention.dgsa import HeadRMSNorm
from gatescope.attention.fused import fused_active
from gatescope.attention.softmax_maps import fused_attention, softmax_map


def lambda_init_for(layer_index: int) -> float:
    return 0.8 - 0.6 * math.exp(-0.3 * layer_index)


class MultiheadDiffAttn(nn.Module):
    def __init__(self, dim: int, num_heads: int, layer_index: int,
                 dar: Optional[DarParams] = None, use_fused: bool = False):
        super().__init__()
        if dim % (2 * num_heads) != 0:
            raise ValueError("dim must be divisible by 2*num_heads")
        self.num_heads = num_heads
        self.head_dim = dim // (2 * num_heads)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.out_proj = nn.Linear(dim, dim)
        self.lambda_init = lambda_init_for(layer_index)
        self.lambda_q1 = nn.Parameter(torch.randn(self.head_dim) * 0.1)
        self.lambda_k1 = nn.Parameter(torch.randn(self.head_dim) * 0.1)
        self.lambda_q2 = nn.Parameter(torch.randn(self.head_dim) * 0.1)
        self.lambda_k2 = nn.Parameter(torch.randn(self.head_dim) * 0.1)
        self.norm = HeadRMSNorm(num_heads, 2 * self.head_dim, 1.0 - self.lambda_init)
        self.dar = DarSettings(dar)
        self.use_fused = use_fused

    def lam(self) -> torch.Tensor:
        return (torch.exp(torch.dot(self.lambda_q1, self.lambda_k1))
                - torch.exp(torch.dot(self.lambda_q2, self.lambda_k2)) + self.lambda_init)

    def _streams(self, x):
        b, n, _ = x.shape
        h, d = self.num_heads, self.head_dim
        qs = self.q_proj(x).view(b, n, h, 2, d).permute(0, 2, 3, 1, 4)
        ks = self.k_proj(x).view(b, n, h, 2, d).permute(0, 2, 3, 1, 4)
        v = self.v_proj(x).view(b, n, h, 2 * d).transpose(1, 2)
        return (qs[:, :, 0].contiguous(), ks[:, :, 0].contiguous(), qs[:, :, 1].contiguous(),
                ks[:, :, 1].contiguous(), v.contiguous())

    def _finish(self, heads, b: int, n: int):
        return self.out_proj(self.norm(heads).transpose(1, 2).reshape(b, n, -1))

    def _branch_maps(self, q, k, key_mask: Optional[torch.Tensor]):
        d = self.dar
        return softmax_map(q, k, d.enabled, d.lam, d.rho, d.alpha, d.beta, d.steps, key_mask)

    def forward(self, x, key_mask: Optional[torch.Tensor] = None
                ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        b, n, _ = x.shape
        q1, k1, q2, k2, v = self._streams(x)
        lam = self.lam()
        d = self.dar
        stats: Dict[str, torch.Tensor] = {}
        if fused_active(self.use_fused):
            o1, c1 = fused_attention(q1, k1, v, d.enabled, d.lam, d.rho, d.alpha, d.beta, d.steps,
                                     key_mask)
            o2, c2 = fused_attention(q2, k2, v, d.enabled, d.lam, d.rho, d.alpha, d.beta, d.steps,
                                     key_mask)
            heads = o1 - lam * o2
            if d.enabled:
                stats["vigilance_mean"] = 0.5 * (c1 + c2).mean(-1)
        else:
            a1, _r1, c1 = self._branch_maps(q1, k1, key_mask)
            a2, _r2, c2 = self._branch_maps(q2, k2, key_mask)
            heads = torch.matmul(a1 - lam * a2, v)
            if c1 is not None and c2 is not None:
                stats["vigilance_mean"] = 0.5 * (c1 + c2).mean(-1)
        return self._finish(heads, b, n), stats

    def forward_with_maps(self, x, key_mask: Optional[torch.Tensor] = None
                          ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Eager maps: attention A1 - lambda A2 (signed) [B,H,N,N] (0 at hidden keys); with
        DAR also resonance (first branch) [B,H,N,N] and vigilance [B,H]."""
        b, n, _ = x.shape
        q1, k1, q2, k2, v = self._streams(x)
        a1, r1, c1 = self._branch_maps(q1, k1, key_mask)
        a2, _r2, c2 = self._branch_maps(q2, k2, key_mask)
        attn = a1 - self.lam() * a2
        maps: Dict[str, torch.Tensor] = {"attention": attn}
        if r1 is not None and c1 is not None and c2 is not None:
            maps["resonance"] = r1
            maps["vigilance"] = 0.5 * (c1 + c2)
        return self._finish(torch.matmul(attn, v), b, n), maps
