"""Multi-scale deformable attention (Deformable DETR), the eager grid_sample reference.

Layout (the public Deformable-DETR convention, also that of the fused op
torch.ops.gatescope.ms_deform_attn):
    value               [N, S, M, D]      S = sum_l H_l * W_l, the levels' maps flattened
                                          row-major and concatenated; M heads, D channels
    spatial_shapes      int64 [L, 2]      (H_l, W_l)
    sampling_locations  [N, Lq, M, L, P, 2]  normalised (x, y): (0, 0) is the top-left corner
                                          of a map, (1, 1) its bottom-right; values outside
                                          [0, 1] are allowed
    attention_weights   [N, Lq, M, L, P]
    output              [N, Lq, M * D]
    out[n, q, m*D:(m+1)*D] = sum_{l, p} attention_weights[n, q, m, l, p]
                             * bilinear(level l of value[n, :, m],
                                        sampling_locations[n, q, m, l, p])
bilinear() is F.grid_sample(mode="bilinear", padding_mode="zeros", align_corners=False) at
grid 2 * loc - 1, i.e. at pixel coordinates (x * W_l - 0.5, y * H_l - 0.5); neighbours outside
the map contribute 0.

This reference is differentiable (value, sampling_locations and attention_weights) and is the
path to train with; the fused op is forward only. Its memory is dominated by the sampled
values, [N * M, D, Lq, P] per level plus their stack over levels.
"""
from typing import List, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

Shapes = Union[torch.Tensor, Sequence[Tuple[int, int]]]


def _level_shapes(spatial_shapes: Shapes) -> List[Tuple[int, int]]:
    if isinstance(spatial_shapes, torch.Tensor):
        return [(int(h), int(w)) for h, w in spatial_shapes.tolist()]
    return [(int(h), int(w)) for h, w in spatial_shapes]


def ms_deform_attn_reference(value: torch.Tensor, spatial_shapes: Shapes,
                             sampling_locations: torch.Tensor,
                             attention_weights: torch.Tensor) -> torch.Tensor:
    """Multi-scale deformable attention with one F.grid_sample per level.

    value [N, S, M, D]; spatial_shapes int64 [L, 2] (or a list of (H, W)) with
    sum H * W = S; sampling_locations [N, Lq, M, L, P, 2]; attention_weights
    [N, Lq, M, L, P]. Returns [N, Lq, M * D] in value's dtype. Computes in the inputs' dtype
    (CPU grid_sample has no float16 kernel in some torch versions: pass float32 there).
    """
    n, s, m, d = value.shape
    _, lq, m2, levels, points, two = sampling_locations.shape
    shapes = _level_shapes(spatial_shapes)
    if m2 != m or two != 2 or len(shapes) != levels:
        raise ValueError(f"sampling_locations {tuple(sampling_locations.shape)} does not fit "
                         f"value {tuple(value.shape)} and {len(shapes)} levels")
    if tuple(attention_weights.shape) != (n, lq, m, levels, points):
        raise ValueError(f"attention_weights {tuple(attention_weights.shape)} must be "
                         f"{(n, lq, m, levels, points)}")
    sizes = [h * w for h, w in shapes]
    if sum(sizes) != s:
        raise ValueError(f"spatial_shapes cover {sum(sizes)} positions, value has S = {s}")
    # grid_sample's coordinates: -1 and 1 are the outer edges of the border pixels.
    grids = 2.0 * sampling_locations - 1.0
    sampled = []
    for lid, (level_value, (h, w)) in enumerate(zip(value.split(sizes, dim=1), shapes)):
        # [N, H*W, M, D] -> [N*M, D, H, W]
        image = level_value.permute(0, 2, 3, 1).reshape(n * m, d, h, w)
        # [N, Lq, M, P, 2] -> [N*M, Lq, P, 2]
        grid = grids[:, :, :, lid].transpose(1, 2).reshape(n * m, lq, points, 2)
        sampled.append(F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros",
                                     align_corners=False))  # [N*M, D, Lq, P]
    # [N*M, D, Lq, L*P] weighted by [N*M, 1, Lq, L*P], summed over levels and points.
    stacked = torch.stack(sampled, dim=-2).flatten(-2)
    weights = attention_weights.transpose(1, 2).reshape(n * m, 1, lq, levels * points)
    out = (stacked * weights).sum(-1)  # [N*M, D, Lq]
    return out.view(n, m * d, lq).transpose(1, 2).contiguous()


def level_start_index(spatial_shapes: torch.Tensor) -> torch.Tensor:
    """int64 [L]: where each level starts in value's S axis (for the fused op)."""
    sizes = spatial_shapes[:, 0] * spatial_shapes[:, 1]
    return sizes.cumsum(0) - sizes
