"""The multi-scale deformable attention module (Deformable DETR), optionally with the PLuG gate.

Parameters follow the public Deformable-DETR layout (models/ops/modules/ms_deform_attn.py),
so a public checkpoint's MSDeformAttn entries load by name:
    sampling_offsets   Linear(d_model, n_heads * n_levels * n_points * 2)
    attention_weights  Linear(d_model, n_heads * n_levels * n_points)   (A_main, the logits)
    value_proj         Linear(d_model, d_model)
    output_proj        Linear(d_model, d_model)
With plug=True (PLuG paper, section 3.2), two more:
    plug_gate          Linear(d_model, n_heads * n_levels)   W_g: raw gate logits r, one per
                                                             head and level
    plug_gml           Linear(1, 2)                          W_phi with bias: gA, gB = w r + b
and the logits become A_main * (1 + G) with G = gA * gB (no tanh), G broadcast over the
n_points points of its (head, level), before the softmax over the n_levels * n_points
entries of each head.

Initialisation: the public one (zero offset weights, offset biases on a circle grid with
radius 1..n_points per point, zero attention_weights, Xavier value/output projections with
zero biases). plug_gml weight [0, 0], bias [0, 1], so gA = 0, gB = 1, G = 0: a plug=True
module computes exactly what the plain one does, and a plain checkpoint loads with
strict=False (missing: only plug_*). dG/d(plug_gml A weight) = r * gB = r and
dG/d(plug_gml A bias) = 1 are non-zero (plug_gate has Xavier weights); note that the loss
gradient reaching G is dL/dlogits * A_main, which is zero while attention_weights still has
its public all-zero initialisation, so in a fresh model the gate starts moving from the
second optimiser step (once attention_weights has moved), and at once in a model whose
attention_weights were loaded from a trained plain checkpoint.

Execution: the eager grid_sample path (differentiable, TorchScript-compatible;
the same computation as gatescope.attention.ms_deform.ms_deform_attn_reference) or, when
use_fused and gradients are off (gatescope.attention.fused), the op
torch.ops.gatescope.ms_deform_attn (forward only; load it with gatescope.ops.load() before
building a scripted use_fused module).
"""
import math
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from gatescope.attention.fused import fused_active


def ms_deform_attn_eager(value: torch.Tensor, spatial_shapes: torch.Tensor,
                         sampling_locations: torch.Tensor,
                         attention_weights: torch.Tensor) -> torch.Tensor:
    """TorchScript-compatible eager multi-scale deformable attention.

    value [N, S, M, D], spatial_shapes int64 [L, 2] (H, W), sampling_locations
    [N, Lq, M, L, P, 2] normalised (x, y), attention_weights [N, Lq, M, L, P] -> [N, Lq, M*D].
    Bilinear sampling with zero padding at pixel (x * W - 0.5, y * H - 0.5). Accumulates
    level by level, so only one level's samples [N*M, D, Lq, P] are held at a time.
    """
    n, _, m, d = value.shape
    lq, levels, points = (sampling_locations.shape[1], sampling_locations.shape[3],
                          sampling_locations.shape[4])
    shapes: List[List[int]] = spatial_shapes.tolist()
    sizes: List[int] = [hw[0] * hw[1] for hw in shapes]
    per_level = value.split(sizes, dim=1)
    grids = sampling_locations * 2.0 - 1.0
    weights = attention_weights.transpose(1, 2)  # [N, M, Lq, L, P]
    out = torch.zeros(n * m, d, lq, dtype=value.dtype, device=value.device)
    for lid in range(levels):
        h, w = shapes[lid][0], shapes[lid][1]
        image = per_level[lid].permute(0, 2, 3, 1).reshape(n * m, d, h, w)
        grid = grids[:, :, :, lid].transpose(1, 2).reshape(n * m, lq, points, 2)
        sampled = F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros",
                                align_corners=False)  # [N*M, D, Lq, P]
        wl = weights[:, :, :, lid].reshape(n * m, 1, lq, points)
        out = out + (sampled * wl).sum(-1)
    return out.view(n, m * d, lq).transpose(1, 2).contiguous()


def level_start_index(spatial_shapes: torch.Tensor) -> torch.Tensor:
    sizes = spatial_shapes[:, 0] * spatial_shapes[:, 1]
    return sizes.cumsum(0) - sizes


class MSDeformAttn(nn.Module):
    """Multi-scale deformable attention (public parameter names), PLuG-gated when plug=True."""

    plug: torch.jit.Final[bool]
    use_fused: torch.jit.Final[bool]

    def __init__(self, d_model: int = 256, n_levels: int = 4, n_heads: int = 8,
                 n_points: int = 4, plug: bool = False, use_fused: bool = False):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.im2col_step = 64  # the public attribute (the CUDA op's batch step); unused here
        self.d_model = d_model
        self.n_levels = n_levels
        self.n_heads = n_heads
        self.n_points = n_points
        self.head_dim = d_model // n_heads
        self.plug = plug
        self.use_fused = use_fused
        self.sampling_offsets = nn.Linear(d_model, n_heads * n_levels * n_points * 2)
        self.attention_weights = nn.Linear(d_model, n_heads * n_levels * n_points)
        self.value_proj = nn.Linear(d_model, d_model)
        self.output_proj = nn.Linear(d_model, d_model)
        if plug:
            self.plug_gate = nn.Linear(d_model, n_heads * n_levels)
            self.plug_gml = nn.Linear(1, 2)
        self._reset_parameters()

    def _reset_parameters(self):
        with torch.no_grad():
            self.sampling_offsets.weight.zero_()
            angle = torch.arange(self.n_heads, dtype=torch.float32) * (2.0 * math.pi / self.n_heads)
            direction = torch.stack([angle.cos(), angle.sin()], -1)  # [H, 2]
            # Scale so that the larger component is +-1: points on a square around the
            # reference, point p at distance p + 1 (in pixels of its level).
            direction = direction / direction.abs().max(-1, keepdim=True)[0]
            radius = torch.arange(1, self.n_points + 1, dtype=torch.float32)
            grid = direction[:, None, None, :] * radius[None, None, :, None]  # [H, 1, P, 2]
            grid = grid.expand(self.n_heads, self.n_levels, self.n_points, 2)
            self.sampling_offsets.bias.copy_(grid.reshape(-1))
            self.attention_weights.weight.zero_()
            self.attention_weights.bias.zero_()
            nn.init.xavier_uniform_(self.value_proj.weight)
            self.value_proj.bias.zero_()
            nn.init.xavier_uniform_(self.output_proj.weight)
            self.output_proj.bias.zero_()
            if self.plug:
                nn.init.xavier_uniform_(self.plug_gate.weight)
                self.plug_gate.bias.zero_()
                self.plug_gml.weight.zero_()
                self.plug_gml.bias.copy_(torch.tensor([0.0, 1.0]))

    def _maps(self, query: torch.Tensor, reference_points: torch.Tensor,
              input_flatten: torch.Tensor, input_spatial_shapes: torch.Tensor,
              input_padding_mask: Optional[torch.Tensor]
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """(value [N, S, M, D], sampling_locations [N, Lq, M, L, P, 2], attention weights
        after softmax [N, Lq, M, L, P], G [N, Lq, M, L] or None)."""
        n, lq, _ = query.shape
        s = input_flatten.shape[1]
        heads, levels, points = self.n_heads, self.n_levels, self.n_points
        if input_spatial_shapes.shape[0] != levels:
            raise ValueError("input_spatial_shapes must have n_levels rows")
        if int((input_spatial_shapes[:, 0] * input_spatial_shapes[:, 1]).sum()) != s:
            raise ValueError("input_spatial_shapes do not cover input_flatten")
        value = self.value_proj(input_flatten)
        if input_padding_mask is not None:
            value = value.masked_fill(input_padding_mask[..., None], 0.0)
        value = value.view(n, s, heads, self.head_dim)
        offsets = self.sampling_offsets(query).view(n, lq, heads, levels, points, 2)
        logits = self.attention_weights(query).view(n, lq, heads, levels, points)
        gate: Optional[torch.Tensor] = None
        if self.plug:
            r = self.plug_gate(query).view(n, lq, heads, levels, 1)
            w = self.plug_gml.weight.view(2)
            b = self.plug_gml.bias
            g = (r * w[0] + b[0]) * (r * w[1] + b[1])  # [N, Lq, M, L, 1], broadcast over P
            logits = logits * (1.0 + g)
            gate = g.squeeze(-1)
        weights = F.softmax(logits.view(n, lq, heads, levels * points), -1)
        weights = weights.view(n, lq, heads, levels, points)
        if reference_points.shape[-1] == 2:
            # offsets are in pixels of their level: divide by (W, H)
            normalizer = torch.stack([input_spatial_shapes[:, 1], input_spatial_shapes[:, 0]],
                                     -1).to(offsets.dtype)
            locations = reference_points[:, :, None, :, None, :] \
                + offsets / normalizer[None, None, None, :, None, :]
        elif reference_points.shape[-1] == 4:
            # boxes (cx, cy, w, h): offsets scaled to half the box size over n_points
            locations = reference_points[:, :, None, :, None, :2] \
                + offsets / points * reference_points[:, :, None, :, None, 2:] * 0.5
        else:
            raise ValueError("the last dim of reference_points must be 2 or 4")
        return value, locations, weights, gate

    def _attend(self, value: torch.Tensor, input_spatial_shapes: torch.Tensor,
                input_level_start_index: torch.Tensor, locations: torch.Tensor,
                weights: torch.Tensor) -> torch.Tensor:
        if fused_active(self.use_fused):
            return torch.ops.gatescope.ms_deform_attn(
                value.contiguous(), input_spatial_shapes.long(),
                input_level_start_index.long(), locations.contiguous(), weights.contiguous())
        return ms_deform_attn_eager(value, input_spatial_shapes, locations, weights)

    def forward(self, query: torch.Tensor, reference_points: torch.Tensor,
                input_flatten: torch.Tensor, input_spatial_shapes: torch.Tensor,
                input_level_start_index: torch.Tensor,
                input_padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """query [N, Lq, C]; reference_points [N, Lq, L, 2] normalised (x, y) in [0, 1]
        (top-left (0, 0), padding included) or [N, Lq, L, 4] boxes (cx, cy, w, h);
        input_flatten [N, S, C]; input_spatial_shapes int64 [L, 2] (H, W);
        input_level_start_index int64 [L]; input_padding_mask bool [N, S], True on padding.
        Returns [N, Lq, C]."""
        value, locations, weights, _ = self._maps(query, reference_points, input_flatten,
                                                  input_spatial_shapes, input_padding_mask)
        out = self._attend(value, input_spatial_shapes, input_level_start_index, locations,
                           weights)
        return self.output_proj(out)

    @torch.jit.export
    def forward_with_maps(self, query: torch.Tensor, reference_points: torch.Tensor,
                          input_flatten: torch.Tensor, input_spatial_shapes: torch.Tensor,
                          input_level_start_index: torch.Tensor,
                          input_padding_mask: Optional[torch.Tensor] = None
                          ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """forward()'s output plus maps: sampling_locations [N, Lq, M, L, P, 2],
        attention_weights (after the softmax) [N, Lq, M, L, P] and, with plug, plug_gate
        (G) [N, Lq, M, L]."""
        value, locations, weights, gate = self._maps(query, reference_points, input_flatten,
                                                     input_spatial_shapes, input_padding_mask)
        out = self._attend(value, input_spatial_shapes, input_level_start_index, locations,
                           weights)
        maps: Dict[str, torch.Tensor] = {"sampling_locations": locations,
                                         "attention_weights": weights}
        if gate is not None:
            maps["plug_gate"] = gate
        return self.output_proj(out), maps
