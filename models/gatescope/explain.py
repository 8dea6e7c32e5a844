"""Reference attention rollout (Abnar & Zuidema, 2020) for gatescope's explain maps.

Per layer, heads are fused (mean, max or min) into one [N, N] map; signed maps (M-DGSA's
g*A+ - (1-g)*A-) are first handled as `raw`, `clamp` (negative weights dropped; the default)
or `abs`. Optionally the smallest `discard_ratio` of each row's weights (never the class
token column) are zeroed; among equal weights the lowest column index goes first. Then A' = (A + I) with rows normalised to sum 1 (a row whose sum is
below 1e-12 in magnitude is left as the identity row), and the rollout is the product
A'_L ... A'_start. The server implements the same function (server/explain/rollout.cc).
"""
from typing import List

import torch

EPS = 1e-12


def fuse_heads(maps: torch.Tensor, head_fusion: str, signed: str) -> torch.Tensor:
    """maps: [H, N, N] -> [N, N]."""
    if signed == "clamp":
        maps = maps.clamp(min=0)
    elif signed == "abs":
        maps = maps.abs()
    elif signed != "raw":
        raise ValueError(f"unknown signed handling {signed}")
    if head_fusion == "mean":
        return maps.mean(0)
    if head_fusion == "max":
        return maps.max(0).values
    if head_fusion == "min":
        return maps.min(0).values
    raise ValueError(f"unknown head fusion {head_fusion}")


def rollout(layers: List[torch.Tensor], head_fusion: str = "mean", signed: str = "clamp",
            discard_ratio: float = 0.0, start_layer: int = 0) -> torch.Tensor:
    """layers: per-layer [H, N, N] maps of one example. Returns the [N, N] rollout."""
    if not 0.0 <= discard_ratio < 1.0:
        raise ValueError("discard_ratio must be in [0, 1)")
    if not 0 <= start_layer < len(layers):
        raise ValueError("start_layer out of range")
    n = layers[0].shape[-1]
    eye = torch.eye(n, dtype=torch.float64)
    result = eye.clone()
    for maps in layers[start_layer:]:
        a = fuse_heads(maps.double(), head_fusion, signed)
        if discard_ratio > 0:
            k = int(discard_ratio * (n - 1))  # per row, among the non-class-token columns
            if k > 0:
                body = a[:, 1:]
                # stable: among equal weights the lowest column index goes first
                idx = torch.sort(body.abs(), dim=-1, stable=True).indices[:, :k]
                body = body.scatter(-1, idx, 0.0)
                a = torch.cat([a[:, :1], body], dim=-1)
        a = a + eye
        sums = a.sum(-1, keepdim=True)
        ok = sums.abs() > EPS
        a = torch.where(ok, a / torch.where(ok, sums, torch.ones_like(sums)), eye)
        result = a @ result
    return result
