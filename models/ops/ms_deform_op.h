// Argument validation and input preparation shared by every backend of
// gatescope::ms_deform_attn (multi-scale deformable attention forward).
#pragma once

#include <torch/library.h>

#include "gatescope/ops/ms_deform_shape.h"

namespace gatescope::ops {

// Checks ranks and shapes (value [N, S, M, D]; spatial_shapes [L, 2];
// level_start_index [L]; sampling_locations [N, Lq, M, L, P, 2];
// attention_weights [N, Lq, M, L, P]), dtypes (value, sampling_locations and
// attention_weights share one floating type; spatial_shapes and level_start_index are
// int64), devices (all on value's) and the level table itself: H_l, W_l >= 0,
// level_start_index[l] = sum_{k < l} H_k W_k and sum_l H_l W_l = S. The table check reads
// the two index tensors on the host, i.e. for CUDA inputs it copies them (L * 3 int64) and
// synchronises. A caller error raises c10::Error. Returns the problem shape.
MsDeformShape CheckMsDeformArgs(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                const at::Tensor& level_start_index,
                                const at::Tensor& sampling_locations,
                                const at::Tensor& attention_weights);

}  // namespace gatescope::ops
