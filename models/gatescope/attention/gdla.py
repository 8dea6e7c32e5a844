"""Gated differential linear attention (GDLA), the core of PVT-GDLA's decoder.

Layout used by the op and this reference: q, k, v, g are [B, H, N, D] with D = 2d the head
dim. Per head, the first d channels of q/k form branch 1, the last d branch 2, and both
branches share the whole v:
    phi(x)   = ELU(x) + 1
    A_j(n)   = sum_m phi(q_j[n]).phi(k_j[m]) v[m] / (sum_m phi(q_j[n]).phi(k_j[m]) + 1e-6)
    y        = RMSNorm(A_1 - lam[h] * A_2) * w          (over D, eps; lam [H, D], w [D])
    out      = y * gate(g)                               gate: sigmoid | silu | none
Each A_j is computed from the d x D summary sum_m phi(k_j[m]) v[m]^T and the d-vector
sum_m phi(k_j[m]), so nothing N x N exists. The public PVT-GDLA code gates with sigmoid;
the paper with SiLU (GATE_KINDS gives the op's integer codes).
"""
from typing import Dict, Optional

import torch
import torch.nn.functional as F

GATE_KINDS: Dict[str, int] = {"sigmoid": 0, "silu": 1, "none": 2}
LINEAR_EPS = 1e-6


def elu_feature(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


def apply_gate(y: torch.Tensor, g: torch.Tensor, gate: int) -> torch.Tensor:
    if gate == 0:
        return y * torch.sigmoid(g)
    if gate == 1:
        return y * F.silu(g)
    return y


def linear_branch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  den_eps: float = LINEAR_EPS) -> torch.Tensor:
    """Kernelised linear attention of one branch: q, k [B, H, N, d], v [B, H, M, D]."""
    fq = elu_feature(q)
    fk = elu_feature(k)
    kv = fk.transpose(-2, -1) @ v                      # [B, H, d, D]
    z = fk.sum(dim=-2)                                 # [B, H, d]
    den = (fq * z.unsqueeze(-2)).sum(dim=-1, keepdim=True) + den_eps
    return (fq @ kv) / den


def gdla_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                   lam: torch.Tensor, norm_weight: Optional[torch.Tensor] = None,
                   eps: float = 1e-5, gate: int = 0) -> torch.Tensor:
    """Eager GDLA in float32 (float64 kept), returned in the input's dtype."""
    dtype = q.dtype
    work = torch.float64 if dtype == torch.float64 else torch.float32
    q, k, v, g = q.to(work), k.to(work), v.to(work), g.to(work)
    d = q.shape[-1] // 2
    a1 = linear_branch(q[..., :d], k[..., :d], v)
    a2 = linear_branch(q[..., d:], k[..., d:], v)
    y = a1 - lam.to(work).view(1, lam.shape[0], 1, lam.shape[1]) * a2
    y = y * torch.rsqrt(y.pow(2).mean(dim=-1, keepdim=True) + eps)
    if norm_weight is not None:
        y = y * norm_weight.to(work)
    return apply_gate(y, g, gate).to(dtype)


def query_attention_weights(q: torch.Tensor, k: torch.Tensor, lam: torch.Tensor,
                            index: int, den_eps: float = LINEAR_EPS) -> torch.Tensor:
    """Effective attention of one query token over all keys, O(N) (no N x N):
    w[m] = a_1[m] - mean_c(lam[h, c]) a_2[m], a_j[m] = phi(q_j).phi(k_j[m]) / sum_m(same),
    i.e. the differential weights that mix v before the norm and gate. q, k [B, H, N, D];
    returns [B, H, N]. The channel-mean lambda makes it one map per head; the exact output
    mixes v with lam[h, c] per channel."""
    d = q.shape[-1] // 2
    out = []
    for lo in (0, d):
        fq = elu_feature(q[:, :, index, lo:lo + d])    # [B, H, d]
        fk = elu_feature(k[..., lo:lo + d])           # [B, H, N, d]
        s = (fk * fq.unsqueeze(-2)).sum(dim=-1)       # [B, H, N]
        out.append(s / (s.sum(dim=-1, keepdim=True) + den_eps))
    return out[0] - lam.mean(dim=-1).view(1, -1, 1) * out[1]
