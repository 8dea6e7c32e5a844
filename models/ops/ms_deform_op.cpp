// Argument validation of gatescope::ms_deform_attn.
#include "ms_deform_op.h"

#include <ATen/ATen.h>

namespace gatescope::ops {

MsDeformShape CheckMsDeformArgs(const at::Tensor& value, const at::Tensor& spatial_shapes,
                                const at::Tensor& level_start_index,
                                const at::Tensor& sampling_locations,
                                const at::Tensor& attention_weights) {
  TORCH_CHECK(value.dim() == 4, "ms_deform_attn: value must be [N, S, M, D], got ",
              value.sizes());
  TORCH_CHECK(spatial_shapes.dim() == 2 && spatial_shapes.size(1) == 2,
              "ms_deform_attn: spatial_shapes must be [L, 2], got ", spatial_shapes.sizes());
  const int64_t levels = spatial_shapes.size(0);
  TORCH_CHECK(level_start_index.dim() == 1 && level_start_index.size(0) == levels,
              "ms_deform_attn: level_start_index must be [L] = [", levels, "], got ",
              level_start_index.sizes());
  TORCH_CHECK(sampling_locations.dim() == 6 && sampling_locations.size(5) == 2,
              "ms_deform_attn: sampling_locations must be [N, Lq, M, L, P, 2], got ",
              sampling_locations.sizes());
  TORCH_CHECK(attention_weights.dim() == 5,
              "ms_deform_attn: attention_weights must be [N, Lq, M, L, P], got ",
              attention_weights.sizes());
  MsDeformShape s;
  s.batch = value.size(0);
  s.spatial = value.size(1);
  s.heads = value.size(2);
  s.channels = value.size(3);
  s.queries = sampling_locations.size(1);
  s.levels = levels;
  s.points = sampling_locations.size(4);
  TORCH_CHECK(sampling_locations.size(0) == s.batch && sampling_locations.size(2) == s.heads &&
                  sampling_locations.size(3) == levels,
              "ms_deform_attn: sampling_locations ", sampling_locations.sizes(),
              " does not fit value ", value.sizes(), " and ", levels, " levels");
  TORCH_CHECK(attention_weights.sizes() == sampling_locations.sizes().slice(0, 5),
              "ms_deform_attn: attention_weights ", attention_weights.sizes(),
              " does not fit sampling_locations ", sampling_locations.sizes());

  const auto dtype = value.scalar_type();
  TORCH_CHECK(at::isFloatingType(dtype), "ms_deform_attn: value must be floating point, got ",
              dtype);
  TORCH_CHECK(sampling_locations.scalar_type() == dtype &&
                  attention_weights.scalar_type() == dtype,
              "ms_deform_attn: value, sampling_locations and attention_weights must share a "
              "dtype, got ",
              dtype, ", ", sampling_locations.scalar_type(), ", ",
              attention_weights.scalar_type());
  TORCH_CHECK(spatial_shapes.scalar_type() == at::kLong &&
                  level_start_index.scalar_type() == at::kLong,
              "ms_deform_attn: spatial_shapes and level_start_index must be int64");
  for (const at::Tensor* t :
       {&spatial_shapes, &level_start_index, &sampling_locations, &attention_weights}) {
    TORCH_CHECK(t->device() == value.device(),
                "ms_deform_attn: every input must be on value's device (", value.device(),
                "), got ", t->device());
  }

  const at::Tensor shapes = spatial_shapes.to(at::kCPU).contiguous();
  const at::Tensor starts = level_start_index.to(at::kCPU).contiguous();
  const int64_t* hw = shapes.data_ptr<int64_t>();
  const int64_t* start = starts.data_ptr<int64_t>();
  int64_t total = 0;
  for (int64_t l = 0; l < levels; ++l) {
    const int64_t h = hw[2 * l], w = hw[2 * l + 1];
    TORCH_CHECK(h >= 0 && w >= 0, "ms_deform_attn: level ", l, " has a negative size (", h,
                ", ", w, ")");
    TORCH_CHECK(start[l] == total, "ms_deform_attn: level_start_index[", l, "] is ", start[l],
                ", but the levels before it hold ", total, " positions");
    TORCH_CHECK(w == 0 || h <= (s.spatial - total) / w, "ms_deform_attn: level ", l, " (", h,
                " x ", w, ") does not fit in value's ", s.spatial, " positions");
    total += h * w;
  }
  TORCH_CHECK(total == s.spatial, "ms_deform_attn: spatial_shapes cover ", total,
              " positions, value has S = ", s.spatial);
  return s;
}

}  // namespace gatescope::ops
