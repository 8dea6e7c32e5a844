"""Differentiable Adaptive Resonance (DAR): a bounded cosine-resonance logit prior.

For one head, with c_ij the cosine of q_i and k_j (norms guarded by EPS, as in the paper's
pseudocode),
    r^(0) = 0,  r^(t+1) = sigmoid(alpha * (c + beta * r^(t) - rho)),  r = r^(steps)
    logits = q k^T / sqrt(d) + lam * r
then the usual mask, softmax and value mix. steps = 1 is the minimal, parameter-free form
sigma(alpha (c - rho)); steps > 1 unrolls the resonance dynamics and requires the
contraction condition alpha * beta / 4 < 1. lam = 0 is plain attention.

Masks: an optional key-padding mask [B, Nk] (True = visible) and a causal flag; a query
row with no visible key yields a zero output. The vigilance-crossing fraction Pr[c > rho]
is counted over the visible (i, j) pairs of each (batch, head).

The fused op torch.ops.gatescope.dar_attention computes the same without any N x N map.
"""
import dataclasses
import math
from typing import Optional, Tuple

import torch

EPS = 1e-8


@dataclasses.dataclass
class DarParams:
    lam: float = 0.0
    rho: float = 0.5
    alpha: float = 8.0
    beta: float = 0.0
    steps: int = 1

    def validate(self):
        if self.steps < 1:
            raise ValueError("DAR steps must be >= 1")
        if self.alpha <= 0:
            raise ValueError("DAR alpha must be > 0")
        if self.steps > 1 and self.alpha * self.beta / 4.0 >= 1.0:
            raise ValueError("DAR dynamics need alpha * beta / 4 < 1 (contraction)")


def cosine(q: torch.Tensor, k: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """[..., Nq, d] x [..., Nk, d] -> [..., Nq, Nk] cosines with guarded norms."""
    qn = q / (q.pow(2).sum(-1, keepdim=True).sqrt() + eps)
    kn = k / (k.pow(2).sum(-1, keepdim=True).sqrt() + eps)
    return torch.matmul(qn, kn.transpose(-1, -2))


def resonance(c: torch.Tensor, rho: float, alpha: float, beta: float, steps: int) -> torch.Tensor:
    r = torch.zeros_like(c)
    for _ in range(steps):
        r = torch.sigmoid(alpha * (c + beta * r - rho))
    return r


def visibility(b: int, nq: int, nk: int, key_padding_mask: Optional[torch.Tensor],
               causal: bool, device: torch.device) -> torch.Tensor:
    """[B, 1, Nq, Nk] bool, True where query i may attend key j."""
    vis = torch.ones(b, 1, nq, nk, dtype=torch.bool, device=device)
    if key_padding_mask is not None:
        vis = vis & key_padding_mask.to(torch.bool)[:, None, None, :]
    if causal:
        vis = vis & torch.ones(nq, nk, dtype=torch.bool, device=device).tril()
    return vis


def dar_reference_maps(q, k, v, key_padding_mask: Optional[torch.Tensor] = None,
                       causal: bool = False, lam: float = 0.0, rho: float = 0.5,
                       alpha: float = 8.0, beta: float = 0.0, steps: int = 1):
    """Eager DAR attention. q: [B,H,Nq,d], k: [B,H,Nk,d], v: [B,H,Nk,dv].

    Returns (out [B,H,Nq,dv], attention A [B,H,Nq,Nk], resonance r [B,H,Nq,Nk],
    vigilance-crossing fraction [B,H]).
    """
    b, _, nq, d = q.shape
    nk = k.shape[2]
    logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    c = cosine(q, k)
    r = resonance(c, rho, alpha, beta, steps)
    logits = logits + lam * r
    vis = visibility(b, nq, nk, key_padding_mask, causal, q.device)
    attn = torch.softmax(logits.masked_fill(~vis, float("-inf")), dim=-1)
    attn = torch.nan_to_num(attn, nan=0.0)  # rows without a visible key
    crossing = ((c > rho) & vis).sum(dim=(-1, -2)).to(q.dtype)
    visible = vis.sum(dim=(-1, -2)).clamp(min=1).to(q.dtype)
    return torch.matmul(attn, v), attn, r, crossing / visible


def dar_reference(q, k, v, key_padding_mask: Optional[torch.Tensor] = None,
                  causal: bool = False, lam: float = 0.0, rho: float = 0.5, alpha: float = 8.0,
                  beta: float = 0.0, steps: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """Eager reference of the fused op: (out, vigilance-crossing fraction [B,H])."""
    out, _, _, crossing = dar_reference_maps(q, k, v, key_padding_mask, causal, lam, rho,
                                             alpha, beta, steps)
    return out, crossing
