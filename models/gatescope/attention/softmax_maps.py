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


def softmax_map(q: torch.Tensor, k: torch.Tensor, use_dar: bool, lam: float, rho: float,
                alpha: float, beta: float, steps: int
                ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """Returns (A [B,H,Nq,Nk], resonance r or None, vigilance-crossing fraction [B,H] or None).
    With use_dar False (or lam = 0) A is exactly softmax(q k^T / sqrt(d))."""
    logits = scaled_logits(q, k)
    if not use_dar:
        return torch.softmax(logits, dim=-1), None, None
    c = cosine(q, k)
    r = resonance(c, rho, alpha, beta, steps)
    crossing = (c > rho).to(q.dtype).mean(dim=(-1, -2))
    return torch.softmax(logits + lam * r, dim=-1), r, crossing


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, use_dar: bool,
                    lam: float, rho: float, alpha: float, beta: float, steps: int
                    ) -> Tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d) + lam r) v through the op library (inference only; no N x N
    map). Returns (out, vigilance-crossing fraction [B,H])."""
    return torch.ops.gatescope.dar_attention(q, k, v, None, False, lam if use_dar else 0.0,
                                             rho, alpha, beta, steps)
