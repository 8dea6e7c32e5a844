"""Multihead Differential Gated Self-Attention (M-DGSA), as specified in the DGSA paper.

Per head h and token t:
    A+ = softmax(Q+ K+^T / sqrt(d')),  A- = softmax(Q- K-^T / sqrt(d'))
    g[t,h] = sigmoid(w_g,h . x_t + b_g,h)
    A = g A+ - (1 - g) A-,   H_h = A V_h
followed by a head-wise RMSNorm scaled by (1 - lambda_init), concatenation, W_O, and
(optionally, as in DGViT) a residual from [Q+; Q-].

The fused path calls torch.ops.gatescope.dgsa_attention, which computes
g softmax(Q+K+^T)V - (1-g) softmax(Q-K-^T)V without materialising any N x N map.
It is an inference kernel (no autograd); train with the eager path.

With the DAR option both branches' logits get the resonance prior (each from its own
cosines); the fused path then runs gatescope.dar_attention per branch and mixes the two
outputs with the gate. Explain reports the excitatory branch's resonance map and the
vigilance-crossing fraction averaged over both branches.
"""
from typing import Dict, Optional, Tuple

import torch
from torch import nn

from gatescope.attention.dar import DarParams
from gatescope.attention.dar_settings import DarSettings
from gatescope.attention.fused import fused_active
from gatescope.attention.softmax_maps import fused_attention, softmax_map


def dgsa_reference(q_pos, k_pos, q_neg, k_neg, v, gate,
                   key_padding_mask: Optional[torch.Tensor] = None):
    """Eager reference of the fused op. q/k: [B,H,N,d], v: [B,H,N,dv], gate: [B,H,N],
    key_padding_mask: optional [B, Nk] bool or uint8, nonzero = visible key (see
    dgsa_reference_maps)."""
    out, _, _ = dgsa_reference_maps(q_pos, k_pos, q_neg, k_neg, v, gate, key_padding_mask)
    return out


def mix(a_pos, a_neg, gate):
    g = gate.unsqueeze(-1)
    return g * a_pos - (1.0 - g) * a_neg


def dgsa_reference_maps(q_pos, k_pos, q_neg, k_neg, v, gate,
                        key_padding_mask: Optional[torch.Tensor] = None):
    """Returns (out, fused map A [B,H,Nq,Nk], gate) using explicit softmax maps.

    key_padding_mask: optional [B, Nk] bool or uint8, nonzero = visible key (the fused op's
    convention, as in dar_attention). Hidden keys' logits are -inf before the softmax of
    both branches; a query row that sees no key gets a zero map, hence a zero output.
    Without a mask the maps are exactly the unmasked ones."""
    if key_padding_mask is None:
        a_pos = softmax_map(q_pos, k_pos, False, 0.0, 0.0, 1.0, 0.0, 1)[0]
        a_neg = softmax_map(q_neg, k_neg, False, 0.0, 0.0, 1.0, 0.0, 1)[0]
    else:
        hidden = ~key_padding_mask.to(torch.bool)[:, None, None, :]  # [B, 1, 1, Nk]
        blind = hidden.all(dim=-1, keepdim=True)  # [B, 1, 1, 1]: rows that see no key
        sqrt_d = float(q_pos.shape[-1]) ** 0.5
        logits_pos = torch.matmul(q_pos, k_pos.transpose(-1, -2)) / sqrt_d
        logits_neg = torch.matmul(q_neg, k_neg.transpose(-1, -2)) / sqrt_d
        # A blind row's softmax is 0/0 (NaN); it is set to 0.
        a_pos = torch.softmax(logits_pos.masked_fill(hidden, float("-inf")), dim=-1)
        a_neg = torch.softmax(logits_neg.masked_fill(hidden, float("-inf")), dim=-1)
        a_pos = a_pos.masked_fill(blind, 0.0)
        a_neg = a_neg.masked_fill(blind, 0.0)
    fused = mix(a_pos, a_neg, gate)
    return torch.matmul(fused, v), fused, gate


class HeadRMSNorm(nn.Module):
    """RMSNorm over the last dim of [B,H,N,dv] with a per-head weight, times a constant."""

    def __init__(self, num_heads: int, dim: int, out_scale: float, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_heads, 1, dim))
        self.out_scale = out_scale
        self.eps = eps

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * self.weight * self.out_scale


def gate_mean(gate: torch.Tensor, key_mask: Optional[torch.Tensor]) -> torch.Tensor:
    """Mean gate [B] of gate [B,H,N] over heads and query tokens, only the visible ones
    (key_mask bool [B, N], True = visible) when a mask is given."""
    if key_mask is None:
        return gate.mean(dim=(1, 2))
    vis = key_mask.to(gate.dtype)
    count = vis.sum(-1).clamp(min=1.0) * gate.shape[1]
    return (gate * vis[:, None, :]).sum(dim=(1, 2)) / count


class MultiheadDGSA(nn.Module):
    """M-DGSA over [B, N, dim]. dim must be divisible by 2*num_heads.

    use_fused selects the op-library kernel for forward() while gradients are off
    (gatescope.attention.fused); forward_with_maps() always uses the eager maps so it can
    return them.

    key_mask (forward and forward_with_maps): optional bool [B, N], True = visible key;
    hidden keys get weight 0 in both branches (eager: -inf logits; fused: the ops'
    key_padding_mask, gatescope.dgsa_attention's 7th argument, or dar_attention's with
    DAR), and "gate_mean" averages over the visible query tokens only, so a padded batch
    gives each example's own numbers. Without a mask nothing changes.
    """

    def __init__(self, dim: int, num_heads: int, lambda_init: float = 0.8,
                 qk_residual: bool = True, use_fused: bool = False,
                 dar: Optional[DarParams] = None):
        super().__init__()
        if dim % (2 * num_heads) != 0:
            raise ValueError("dim must be divisible by 2*num_heads")
        self.num_heads = num_heads
        self.head_dim = dim // (2 * num_heads)  # d' of each excitatory/inhibitory stream
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.gate_proj = nn.Linear(dim, num_heads)
        self.norm = HeadRMSNorm(num_heads, 2 * self.head_dim, 1.0 - lambda_init)
        self.out_proj = nn.Linear(dim, dim)
        self.qk_residual = qk_residual
        self.use_fused = use_fused
        self.dar = DarSettings(dar)

    def _streams(self, x) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                   torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, _ = x.shape
        h, d = self.num_heads, self.head_dim
        q = self.q_proj(x)
        # [B,N,h,2,d'] -> [B,h,2,N,d']; stream 0 is excitatory (+), stream 1 inhibitory (-)
        qs = q.view(b, n, h, 2, d).permute(0, 2, 3, 1, 4)
        ks = self.k_proj(x).view(b, n, h, 2, d).permute(0, 2, 3, 1, 4)
        v = self.v_proj(x).view(b, n, h, 2 * d).transpose(1, 2)
        gate = torch.sigmoid(self.gate_proj(x)).transpose(1, 2)  # [B,H,N]
        return (qs[:, :, 0].contiguous(), ks[:, :, 0].contiguous(),
                qs[:, :, 1].contiguous(), ks[:, :, 1].contiguous(),
                v.contiguous(), gate.contiguous(), q)

    def _finish(self, heads, q, b: int, n: int):
        out = self.norm(heads).transpose(1, 2).reshape(b, n, -1)
        out = self.out_proj(out)
        if self.qk_residual:
            out = out + q
        return out

    def _branch_maps(self, q, k, key_mask: Optional[torch.Tensor]):
        d = self.dar
        return softmax_map(q, k, d.enabled, d.lam, d.rho, d.alpha, d.beta, d.steps, key_mask)

    def forward(self, x, key_mask: Optional[torch.Tensor] = None
                ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Returns (out, stats): stats "gate_mean" [B] (mean gate over heads and visible
        tokens) and, with DAR, "vigilance_mean" [B] (crossing fraction over heads and both
        branches)."""
        b, n, _ = x.shape
        q_pos, k_pos, q_neg, k_neg, v, gate, q = self._streams(x)
        stats: Dict[str, torch.Tensor] = {"gate_mean": gate_mean(gate, key_mask)}
        d = self.dar
        fused = fused_active(self.use_fused)
        if fused and not d.enabled:
            if key_mask is None:
                heads = torch.ops.gatescope.dgsa_attention(q_pos, k_pos, q_neg, k_neg, v, gate)
            else:
                heads = torch.ops.gatescope.dgsa_attention(q_pos, k_pos, q_neg, k_neg, v, gate,
                                                           key_mask.to(torch.bool))
        elif fused:
            o_pos, c_pos = fused_attention(q_pos, k_pos, v, True, d.lam, d.rho, d.alpha, d.beta,
                                           d.steps, key_mask)
            o_neg, c_neg = fused_attention(q_neg, k_neg, v, True, d.lam, d.rho, d.alpha, d.beta,
                                           d.steps, key_mask)
            g = gate.unsqueeze(-1)
            heads = g * o_pos - (1.0 - g) * o_neg
            stats["vigilance_mean"] = 0.5 * (c_pos + c_neg).mean(-1)
        else:
            a_pos, _r_pos, c_pos = self._branch_maps(q_pos, k_pos, key_mask)
            a_neg, _r_neg, c_neg = self._branch_maps(q_neg, k_neg, key_mask)
            heads = torch.matmul(mix(a_pos, a_neg, gate), v)
            if c_pos is not None and c_neg is not None:
                stats["vigilance_mean"] = 0.5 * (c_pos + c_neg).mean(-1)
        return self._finish(heads, q, b, n), stats

    def forward_with_maps(self, x, key_mask: Optional[torch.Tensor] = None
                          ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Eager maps: attention (fused, signed) [B,H,N,N] (0 at hidden keys), gate [B,H,N];
        with DAR also resonance (excitatory branch) [B,H,N,N] and vigilance [B,H]."""
        b, n, _ = x.shape
        q_pos, k_pos, q_neg, k_neg, v, gate, q = self._streams(x)
        a_pos, r_pos, c_pos = self._branch_maps(q_pos, k_pos, key_mask)
        a_neg, _r_neg, c_neg = self._branch_maps(q_neg, k_neg, key_mask)
        fused = mix(a_pos, a_neg, gate)
        maps: Dict[str, torch.Tensor] = {"attention": fused, "gate": gate}
        if r_pos is not None and c_pos is not None and c_neg is not None:
            maps["resonance"] = r_pos
            maps["vigilance"] = 0.5 * (c_pos + c_neg)
        return self._finish(torch.matmul(fused, v), q, b, n), maps
