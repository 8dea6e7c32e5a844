// CUDA backend of gatescope::gdla_attention: ATen glue around the raw-pointer kernels.
// Built only when the LibTorch found was built with CUDA.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "gatescope/ops/gdla_cuda_kernel.h"
#include "gdla_op.h"

namespace gatescope::ops {
namespace {

at::Tensor GdlaAttentionCuda(const at::Tensor& q_in, const at::Tensor& k_in,
                             const at::Tensor& v_in, const at::Tensor& g_in,
                             const at::Tensor& lam_in,
                             const c10::optional<at::Tensor>& norm_weight, double eps,
                             int64_t gate) {
  const GdlaShape shape = CheckGdlaArgs(q_in, k_in, v_in, g_in, lam_in, norm_weight, eps, gate);
  const auto in_type = q_in.scalar_type();
  TORCH_CHECK(in_type == at::kFloat || in_type == at::kHalf || in_type == at::kBFloat16,
              "gdla_attention (CUDA): float32, float16 or bfloat16 inputs expected");
  TORCH_CHECK(shape.dim <= kGdlaCudaMaxHeadDim, "gdla_attention (CUDA): head dim D up to ",
              kGdlaCudaMaxHeadDim, ", got ", shape.dim);
  // bfloat16 runs through the float32 kernels.
  const auto work_type = in_type == at::kHalf ? at::kHalf : at::kFloat;
  const c10::cuda::CUDAGuard guard(q_in.device());
  auto prep = [&](const at::Tensor& t) { return t.to(work_type).contiguous(); };
  const at::Tensor q = prep(q_in), k = prep(k_in), v = prep(v_in), g = prep(g_in);
  // lam and the norm weight are fp32 for both kernels.
  const at::Tensor lam = lam_in.to(at::kFloat).contiguous();
  const at::Tensor weight = GdlaNormWeight(norm_weight, at::kFloat);
  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor workspace =
      at::empty({GdlaCudaWorkspaceFloats(shape)}, q.options().dtype(at::kFloat));
  const int err = LaunchGdlaForward(
      shape, work_type == at::kHalf ? GdlaDType::kFloat16 : GdlaDType::kFloat32, q.data_ptr(),
      k.data_ptr(), v.data_ptr(), g.data_ptr(), lam.data_ptr<float>(),
      weight.defined() ? weight.data_ptr<float>() : nullptr, out.data_ptr(),
      workspace.data_ptr<float>(), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "gdla_attention (CUDA): ", GdlaCudaErrorString(err));
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CUDA, m) {
  m.impl("gdla_attention", &gatescope::ops::GdlaAttentionCuda);
}
