// CUDA backend of gatescope::ms_deform_attn: ATen glue around the raw-pointer kernel.
// Built only when the LibTorch found was built with CUDA.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "gatescope/ops/ms_deform_cuda_kernel.h"
#include "ms_deform_op.h"

namespace gatescope::ops {
namespace {

at::Tensor MsDeformAttnCuda(const at::Tensor& value_in, const at::Tensor& spatial_shapes_in,
                            const at::Tensor& level_start_in, const at::Tensor& locations_in,
                            const at::Tensor& weights_in) {
  const c10::cuda::CUDAGuard guard(value_in.device());
  // Also validates the level table on the host (a small copy and a synchronisation).
  const MsDeformShape shape =
      CheckMsDeformArgs(value_in, spatial_shapes_in, level_start_in, locations_in, weights_in);
  const auto in_type = value_in.scalar_type();
  TORCH_CHECK(in_type == at::kFloat || in_type == at::kHalf || in_type == at::kBFloat16 ||
                  in_type == at::kDouble,
              "ms_deform_attn (CUDA): float32, float16, bfloat16 or float64 inputs expected");
  // bfloat16 runs through the float32 kernel.
  const auto work_type = in_type == at::kBFloat16 ? at::kFloat : in_type;
  auto prep = [&](const at::Tensor& t) { return t.to(work_type).contiguous(); };
  const at::Tensor value = prep(value_in), locations = prep(locations_in),
                   weights = prep(weights_in);
  const at::Tensor spatial_shapes = spatial_shapes_in.contiguous(),
                   level_start = level_start_in.contiguous();
  at::Tensor out =
      at::empty({shape.batch, shape.queries, shape.heads * shape.channels}, value.options());
  const MsDeformDType dtype = work_type == at::kHalf     ? MsDeformDType::kFloat16
                              : work_type == at::kDouble ? MsDeformDType::kFloat64
                                                         : MsDeformDType::kFloat32;
  const int err = LaunchMsDeformForward(
      shape, dtype, value.data_ptr(), spatial_shapes.data_ptr<int64_t>(),
      level_start.data_ptr<int64_t>(), locations.data_ptr(), weights.data_ptr(), out.data_ptr(),
      at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "ms_deform_attn (CUDA): ", MsDeformCudaErrorString(err));
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CUDA, m) {
  m.impl("ms_deform_attn", &gatescope::ops::MsDeformAttnCuda);
}
