"""Pairwise logit gating (PLuG) attention, the eager reference and the module.

Per head h, query i, key j (head-shared gate, as in the PLuG paper for ViTs):
    s_hij = q_hi . k_hj * scale                       (scale = 1 / sqrt(d_h))
    r_ij  = qg_i . kg_j * gate_scale                  (qg, kg: [B, N, d_g], shared by heads)
    gA, gB = w_A r_ij + b_A,  w_B r_ij + b_B          (the gating modulation layer, 1 -> 2)
    G_ij  = tanh(gA * gB)          (no tanh when tanh_gate is False)
    p_hij = softmax_j(s_hij * (1 + G_ij)),  out_hi = sum_j p_hij v_hj
The fused op gatescope::plug_attention computes this per key tile without holding S, R
or G as N x N tensors; this file holds the reference and the maps explain returns.

Initialisation: w_A = b_A = 0 and w_B = 0, b_B = 1, so G = 0 (the gate is off, a plain
checkpoint behaves exactly as before) while the gradient of w_A, b_A is not zero (with both
factors zero, neither could ever move).
"""
import math
from typing import Dict, Tuple

import torch
from torch import nn

from gatescope.attention.fused import fused_active


def plug_gate(q_gate: torch.Tensor, k_gate: torch.Tensor, gml_weight: torch.Tensor,
              gml_bias: torch.Tensor, gate_scale: float, tanh_gate: bool = True) -> torch.Tensor:
    """G [B, N, M] from q_gate [B, N, dg], k_gate [B, M, dg], gml_weight [2, 1], gml_bias [2]."""
    r = (q_gate @ k_gate.transpose(-2, -1)) * gate_scale
    w = gml_weight.reshape(2)
    g = (w[0] * r + gml_bias[0]) * (w[1] * r + gml_bias[1])
    return torch.tanh(g) if tanh_gate else g


def plug_reference_maps(q, k, v, q_gate, k_gate, gml_weight, gml_bias, scale: float,
                        gate_scale: float, tanh_gate: bool = True) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out [B, H, N, dv], attention probabilities [B, H, N, M], gate G [B, N, M])."""
    gate = plug_gate(q_gate, k_gate, gml_weight, gml_bias, gate_scale, tanh_gate)
    logits = (q @ k.transpose(-2, -1)) * scale * (1.0 + gate.unsqueeze(1))
    probs = logits.softmax(dim=-1)
    return probs @ v, probs, gate


def plug_reference(q, k, v, q_gate, k_gate, gml_weight, gml_bias, scale: float,
                   gate_scale: float, tanh_gate: bool = True) -> torch.Tensor:
    return plug_reference_maps(q, k, v, q_gate, k_gate, gml_weight, gml_bias, scale,
                               gate_scale, tanh_gate)[0]


class PlugAttention(nn.Module):
    """Multi-head self-attention with timm's parameter names (`qkv`, `proj`) plus, when
    `gated`, the PLuG gate (`q_gate`, `k_gate`: C -> d_g; `gml`: 1 -> 2); without it, plain
    DeiT attention. use_fused routes forward() through the op library when gradients are
    off (the ops have no backward): gatescope::plug_attention, or for the plain variant
    gatescope::dar_attention with lambda 0 (exactly softmax attention).

    forward(x) -> (out, stats): when gated, stats "plug_scale_mean" [B] is the mean over every
    (query, key) pair of the factor 1 + G that scales the logits, in [0, 2] (served per layer
    as gatescope_plug_scale_mean: 1 + G rather than G, because a histogram's sum must not
    fall for Prometheus' rate() to read it, and G is signed); the plain variant returns no
    stats."""

    gated: torch.jit.Final[bool]  # a constant: TorchScript compiles only the live variant

    def __init__(self, dim: int, num_heads: int, gated: bool = True, gate_dim: int = 0,
                 qkv_bias: bool = True, use_fused: bool = False):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.gate_dim = gate_dim if gate_dim > 0 else self.head_dim
        self.scale = self.head_dim ** -0.5
        self.gate_scale = 1.0 / math.sqrt(self.head_dim)
        self.gated = gated
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        if gated:
            self.q_gate = nn.Linear(dim, self.gate_dim)
            self.k_gate = nn.Linear(dim, self.gate_dim)
            self.gml = nn.Linear(1, 2)
            with torch.no_grad():
                self.gml.weight.zero_()
                self.gml.bias.copy_(torch.tensor([0.0, 1.0]))
        self.use_fused = use_fused

    def _qkv(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return qkv[0], qkv[1], qkv[2]

    def _out(self, heads: torch.Tensor) -> torch.Tensor:
        b, _, n, _ = heads.shape
        return self.proj(heads.transpose(1, 2).reshape(b, n, -1))

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        q, k, v = self._qkv(x)
        fused = fused_active(self.use_fused)
        if not self.gated:
            if fused:
                heads = torch.ops.gatescope.dar_attention(q, k, v, None, False, 0.0, 0.5, 8.0,
                                                          0.0, 1)[0]
            else:
                heads = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1) @ v
            return self._out(heads), {}
        w, b = self.gml.weight, self.gml.bias
        qg, kg = self.q_gate(x), self.k_gate(x)
        if fused:
            heads = torch.ops.gatescope.plug_attention(q, k, v, qg, kg, w, b, self.scale,
                                                       self.gate_scale, True)
        else:
            heads = plug_reference(q, k, v, qg, kg, w, b, self.scale, self.gate_scale, True)
        # The fused op never holds G; the served statistic recomputes it (N^2 * d_g per
        # example, a few percent of the layer: docs/benchmarks.md).
        gate = plug_gate(qg, kg, w, b, self.gate_scale, True)
        return self._out(heads), {"plug_scale_mean": 1.0 + gate.mean(dim=(1, 2))}

    def forward_with_maps(self, x: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Output plus maps: attention [B, H, N, N] and, when gated, plug_gate [B, N, N] (G)."""
        q, k, v = self._qkv(x)
        if not self.gated:
            probs = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
            return self._out(probs @ v), {"attention": probs}
        w, b = self.gml.weight, self.gml.bias
        heads, probs, gate = plug_reference_maps(q, k, v, self.q_gate(x), self.k_gate(x), w, b,
                                                 self.scale, self.gate_scale, True)
        return self._out(heads), {"attention": probs, "plug_gate": gate}
