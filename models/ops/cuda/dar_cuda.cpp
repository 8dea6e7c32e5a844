// CUDA backend of gatescope::dar_attention: ATen glue around the raw-pointer kernel.
// Built only when the LibTorch found was built with CUDA.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "dar_op.h"
#include "gatescope/ops/dar_cuda_kernel.h"

namespace gatescope::ops {
namespace {

std::tuple<at::Tensor, at::Tensor> DarAttentionCuda(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const c10::optional<at::Tensor>& key_padding_mask, bool causal, double lam, double rho,
    double alpha, double beta, int64_t steps) {
  const DarShape shape =
      CheckDarArgs(q_in, k_in, v_in, key_padding_mask, {causal, lam, rho, alpha, beta, steps});
  const auto in_type = q_in.scalar_type();
  TORCH_CHECK(in_type == at::kFloat || in_type == at::kHalf || in_type == at::kBFloat16,
              "dar_attention (CUDA): float32, float16 or bfloat16 inputs expected");
  // bfloat16 runs through the float32 kernel.
  const auto work_type = in_type == at::kHalf ? at::kHalf : at::kFloat;
  const c10::cuda::CUDAGuard guard(q_in.device());
  auto prep = [&](const at::Tensor& t) { return t.to(work_type).contiguous(); };
  const at::Tensor q = prep(q_in), k = prep(k_in), v = prep(v_in);
  const at::Tensor mask = DarMaskBytes(key_padding_mask);
  at::Tensor out = at::empty({shape.batch, shape.heads, shape.nq, shape.dv}, q.options());
  // The kernel overwrites every row it is launched for; zeros cover the no-launch cases.
  at::Tensor row_stats =
      at::zeros({shape.batch, shape.heads, shape.nq, 2}, q.options().dtype(at::kFloat));
  const int err = LaunchDarForward(
      shape, work_type == at::kHalf ? DarDType::kFloat16 : DarDType::kFloat32, q.data_ptr(),
      k.data_ptr(), v.data_ptr(), mask.defined() ? mask.data_ptr<uint8_t>() : nullptr,
      out.data_ptr(), row_stats.data_ptr<float>(), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "dar_attention (CUDA): ", DarCudaErrorString(err), " (head dims up to ",
              kDarCudaMaxHeadDim, ")");
  return {out.to(in_type), DarCrossingFraction(row_stats, in_type)};
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CUDA, m) {
  m.impl("dar_attention", &gatescope::ops::DarAttentionCuda);
}
