"""The GDLA decoder block of PVT-GDLA (parameter names of the public code).

GatedDiffLinearAttn: one linear map to [q, k, v, g] (4C), used twice: as is (main path) and
after a depthwise 3x3 + pointwise conv over the token grid (local path); each path runs
gated differential linear attention with its own lambda [H, D]; the two results are
concatenated and projected back to C. GDLAM wraps it as
    x + mixer(SiLU(conv3x3(LN(x))))  then  x + GatedConvFfn(LN(x)).

use_fused selects gatescope::gdla_attention for forward() when gradients are off
(gatescope.attention.fused); forward_with_gate() also returns the per-example gate mean
(the served statistic gdla_gate_mean); explain() runs the eager reference and also returns
per-token gate means and one query token's effective attention (O(N)).
"""
from typing import Dict, Tuple

import torch
from torch import nn

from gatescope.attention.fused import fused_active
from gatescope.attention.gdla import GATE_KINDS, gdla_reference, query_attention_weights
from gatescope.networks.seg_blocks import GatedConvFfn, RMSNorm


class GatedDiffLinearAttn(nn.Module):
    def __init__(self, dim: int, n_heads: int, qkv_bias: bool = True, gate: str = "sigmoid",
                 use_fused: bool = False):
        super().__init__()
        if dim % n_heads != 0 or (dim // n_heads) % 2 != 0:
            raise ValueError("dim must split into n_heads heads of even size")
        if gate not in GATE_KINDS:
            raise ValueError(f"gate must be one of {sorted(GATE_KINDS)}")
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.gate = GATE_KINDS[gate]
        self.use_fused = use_fused
        self.qkvg = nn.Linear(dim, 4 * dim, bias=qkv_bias)
        self.ln = RMSNorm(self.head_dim, eps=1e-5)
        self.dwc = nn.Conv2d(4 * dim, 4 * dim, 3, 1, 1, groups=4 * dim, bias=True)
        self.pwc = nn.Conv2d(4 * dim, 4 * dim, 1, 1, 0, bias=True)
        self.lambda_scale_main = nn.Parameter(torch.randn(n_heads, self.head_dim) * 0.1)
        self.lambda_scale_aux = nn.Parameter(torch.randn(n_heads, self.head_dim) * 0.1)
        self.out_proj = nn.Linear(2 * dim, dim, bias=True)

    def _paths(self, x: torch.Tensor, h: int, w: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """[q, k, v, g] of the main and local paths, each [4, B, H, N, D]."""
        b, n, c = x.shape
        main = self.qkvg(x)
        local = self.pwc(self.dwc(main.transpose(1, 2).reshape(b, 4 * c, h, w)))
        local = local.reshape(b, 4 * c, n).transpose(1, 2)
        shape = (b, n, 4, self.n_heads, self.head_dim)
        return (main.reshape(shape).permute(2, 0, 3, 1, 4),
                local.reshape(shape).permute(2, 0, 3, 1, 4))

    def _attend(self, p: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
        if fused_active(self.use_fused):
            return torch.ops.gatescope.gdla_attention(p[0], p[1], p[2], p[3], lam,
                                                      self.ln.weight, self.ln.eps, self.gate)
        return gdla_reference(p[0], p[1], p[2], p[3], lam, self.ln.weight, self.ln.eps,
                              self.gate)

    def _merge(self, y_main: torch.Tensor, y_local: torch.Tensor) -> torch.Tensor:
        b, _, n, _ = y_main.shape
        y = torch.cat([y_main.permute(0, 2, 1, 3).reshape(b, n, -1),
                       y_local.permute(0, 2, 1, 3).reshape(b, n, -1)], dim=-1)
        return self.out_proj(y)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        main, local = self._paths(x, h, w)
        return self._merge(self._attend(main, self.lambda_scale_main),
                           self._attend(local, self.lambda_scale_aux))

    def forward_with_gate(self, x: torch.Tensor, h: int, w: int
                          ) -> Tuple[torch.Tensor, torch.Tensor]:
        """forward()'s output plus the gate mean [B]: the gate values averaged over both
        paths, heads, tokens and channels (the mean of explain()'s `gate` map). The op
        applies the gate inside and does not return it, so this is one more elementwise
        pass over g."""
        main, local = self._paths(x, h, w)
        y = self._merge(self._attend(main, self.lambda_scale_main),
                        self._attend(local, self.lambda_scale_aux))
        gate = 0.5 * (self._gate_values(main[3]).mean(dim=(1, 2, 3))
                      + self._gate_values(local[3]).mean(dim=(1, 2, 3)))
        return y, gate

    def explain(self, x: torch.Tensor, h: int, w: int,
                query: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Output plus maps [B, N]: `gate` (gate value averaged over heads, channels and
        both paths) and `attention` (the query token's differential weights over all tokens,
        averaged over heads and paths)."""
        main, local = self._paths(x, h, w)
        y_main = gdla_reference(main[0], main[1], main[2], main[3], self.lambda_scale_main,
                                self.ln.weight, self.ln.eps, self.gate)
        y_local = gdla_reference(local[0], local[1], local[2], local[3],
                                 self.lambda_scale_aux, self.ln.weight, self.ln.eps,
                                 self.gate)
        gates = torch.stack([self._gate_values(main[3]), self._gate_values(local[3])])
        attn = torch.stack([
            query_attention_weights(main[0], main[1], self.lambda_scale_main, query),
            query_attention_weights(local[0], local[1], self.lambda_scale_aux, query)])
        maps = {"gate": gates.mean(dim=[0, 2, 4]), "attention": attn.mean(dim=[0, 2])}
        return self._merge(y_main, y_local), maps

    def _gate_values(self, g: torch.Tensor) -> torch.Tensor:
        if self.gate == 0:
            return torch.sigmoid(g)
        if self.gate == 1:
            return torch.nn.functional.silu(g)
        return torch.ones_like(g)


class GDLAM(nn.Module):
    def __init__(self, dim: int, n_heads: int, qkv_bias: bool = True, norm_eps: float = 1e-5,
                 hidden_ratio: float = 4.0, gate: str = "sigmoid", use_fused: bool = False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.dwc = nn.Conv2d(dim, dim, 3, 1, 1, bias=True)
        self.act = nn.SiLU()
        self.attn = GatedDiffLinearAttn(dim, n_heads, qkv_bias, gate, use_fused)
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = GatedConvFfn(dim, int(hidden_ratio * dim))

    def _mixer_input(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        b, n, c = x.shape
        y = self.norm1(x).reshape(b, h, w, c).permute(0, 3, 1, 2)
        return self.act(self.dwc(y)).permute(0, 2, 3, 1).reshape(b, n, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        t = x.reshape(b, c, h * w).transpose(1, 2)
        t = t + self.attn(self._mixer_input(t, h, w), h, w)
        t = t + self.mlp(self.norm2(t), h, w)
        return t.reshape(b, h, w, c).permute(0, 3, 1, 2)

    def forward_with_gate(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """forward()'s output plus the attention's gate mean [B] (GatedDiffLinearAttn)."""
        b, c, h, w = x.shape
        t = x.reshape(b, c, h * w).transpose(1, 2)
        y, gate = self.attn.forward_with_gate(self._mixer_input(t, h, w), h, w)
        t = t + y
        t = t + self.mlp(self.norm2(t), h, w)
        return t.reshape(b, h, w, c).permute(0, 3, 1, 2), gate

    def explain(self, x: torch.Tensor, query: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        b, c, h, w = x.shape
        t = x.reshape(b, c, h * w).transpose(1, 2)
        y, maps = self.attn.explain(self._mixer_input(t, h, w), h, w, query)
        t = t + y
        t = t + self.mlp(self.norm2(t), h, w)
        return t.reshape(b, h, w, c).permute(0, 3, 1, 2), maps
