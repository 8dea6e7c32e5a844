// CUDA backend of gatescope::plug_attention: ATen glue around the raw-pointer kernel.
// Built only when the LibTorch found was built with CUDA.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "gatescope/ops/plug_cuda_kernel.h"
#include "plug_op.h"

namespace gatescope::ops {
namespace {

at::Tensor PlugAttentionCuda(const at::Tensor& q_in, const at::Tensor& k_in,
                             const at::Tensor& v_in, const at::Tensor& q_gate_in,
                             const at::Tensor& k_gate_in, const at::Tensor& gml_weight,
                             const at::Tensor& gml_bias, double scale, double gate_scale,
                             bool tanh_gate) {
  const PlugShape shape = CheckPlugArgs(q_in, k_in, v_in, q_gate_in, k_gate_in, gml_weight,
                                        gml_bias, scale, gate_scale, tanh_gate);
  const auto in_type = q_in.scalar_type();
  TORCH_CHECK(in_type == at::kFloat || in_type == at::kHalf || in_type == at::kBFloat16,
              "plug_attention (CUDA): float32, float16 or bfloat16 inputs expected");
  // bfloat16 runs through the float32 kernel.
  const auto work_type = in_type == at::kHalf ? at::kHalf : at::kFloat;
  const c10::cuda::CUDAGuard guard(q_in.device());
  auto prep = [&](const at::Tensor& t) { return t.to(work_type).contiguous(); };
  const at::Tensor q = prep(q_in), k = prep(k_in), v = prep(v_in), qg = prep(q_gate_in),
                   kg = prep(k_gate_in);
  // The gml weights stay on the device: the kernel reads this float[4] itself, so the call
  // never synchronises with the device.
  const at::Tensor gml = PlugGmlParams(gml_weight, gml_bias, at::kFloat);
  at::Tensor out = at::empty({shape.batch, shape.heads, shape.nq, shape.dv}, q.options());
  const int err = LaunchPlugForward(
      shape, work_type == at::kHalf ? PlugDType::kFloat16 : PlugDType::kFloat32, q.data_ptr(),
      k.data_ptr(), v.data_ptr(), qg.data_ptr(), kg.data_ptr(), gml.data_ptr<float>(),
      out.data_ptr(), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "plug_attention (CUDA): ", PlugCudaErrorString(err),
              " (head and gate dims up to ", kPlugCudaMaxHeadDim, ")");
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CUDA, m) {
  m.impl("plug_attention", &gatescope::ops::PlugAttentionCuda);
}
