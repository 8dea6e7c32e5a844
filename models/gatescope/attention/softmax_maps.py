"""Softmax attention maps with the optional DAR prior, shared by every attention module so
that eager maps are computed identically everywhere (one logit expression, one softmax).

`dar` settings travel as plain floats so TorchScript can compile the callers.
"""
import math
from typing import Optional, Tuple

import torch

from gatescope.attention.dar import cosine, resonance


def scaled_logits(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(float(q.shape[-1]))


def masked_logits(logits: torch.Tensor, key_mask: Optional[torch.Tensor]) -> torch.Tensor:
    """logits [B,H,Nq,Nk] with the keys that `key_mask` (bool [B, Nk], True = visible) hides
    set to -inf; unchanged (the same tensor) without a mask."""
    if key_mask is None:
        return logits
    hidden = ~key_mask.to(torch.bool)[:, None, None, :]
    return logits.masked_fill(hidden, float("-inf"))


def softmax_map(q: torch.Tensor, k: torch.Tensor, use_dar: bool, lam: float, rho: float,
                alpha: float, beta: float, steps: int,
                key_mask: Optional[torch.Tensor] = None
                ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """Returns (A [B,H,Nq,Nk], resonance r or None, vigilance-crossing fraction [B,H] or None).
    With use_dar False (or lam = 0) A is exactly softmax(q k^T / sqrt(d)).

    key_mask: optional bool [B, Nk], True = visible key; hidden keys get weight 0 (their
    logits are -inf before the softmax; every query row must see at least one key). With
    DAR the crossing fraction then counts the visible (i, j) pairs only, as the fused op
    does. Without a mask the computation is exactly the unmasked one."""
    logits = scaled_logits(q, k)
    if not use_dar:
        return torch.softmax(masked_logits(logits, key_mask), dim=-1), None, None
    c = cosine(q, k)
    r = resonance(c, rho, alpha, beta, steps)
    if key_mask is None:
        crossing = (c > rho).to(q.dtype).mean(dim=(-1, -2))
    else:
        vis = key_mask.to(torch.bool)[:, None, None, :].expand(c.shape)
        crossing = ((c > rho) & vis).sum(dim=(-1, -2)).to(q.dtype) \
            / vis.sum(dim=(-1, -2)).clamp(min=1).to(q.dtype)
    return torch.softmax(masked_logits(logits + lam * r, key_mask), dim=-1), r, crossing


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, use_dar: bool,
                    lam: float, rho: float, alpha: float, beta: float, steps: int,
                    key_mask: Optional[torch.Tensor] = None
                    ) -> Tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d) + lam r) v through the op library (inference only; no N x N
    map). Returns (out, vigilance-crossing fraction [B,H]). key_mask: optional bool [B, Nk],
    True = visible key (the op's key_padding_mask)."""
    return torch.ops.gatescope.dar_attention(q, k, v, key_mask, False, lam if use_dar else 0.0,
                                             rho, alpha, beta, steps)
