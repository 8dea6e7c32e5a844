// CUDA backend of gatescope::dgsa_attention: ATen glue around the raw-pointer kernel.
// Built only when the LibTorch found was built with CUDA.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "dgsa_op.h"
#include "gatescope/ops/dgsa_cuda_kernel.h"

namespace gatescope::ops {
namespace {

at::Tensor DgsaAttentionCuda(const at::Tensor& q_pos_in, const at::Tensor& k_pos_in,
                             const at::Tensor& q_neg_in, const at::Tensor& k_neg_in,
                             const at::Tensor& v_in, const at::Tensor& gate_in,
                             const c10::optional<at::Tensor>& key_padding_mask) {
  const DgsaShape shape =
      CheckDgsaArgs(q_pos_in, k_pos_in, q_neg_in, k_neg_in, v_in, gate_in, key_padding_mask);
  const auto in_type = q_pos_in.scalar_type();
  TORCH_CHECK(in_type == at::kFloat || in_type == at::kHalf || in_type == at::kBFloat16,
              "dgsa_attention (CUDA): float32, float16 or bfloat16 inputs expected");
  // bfloat16 runs through the float32 kernel.
  const auto work_type = in_type == at::kHalf ? at::kHalf : at::kFloat;
  const c10::cuda::CUDAGuard guard(q_pos_in.device());
  auto prep = [&](const at::Tensor& t) { return t.to(work_type).contiguous(); };
  const at::Tensor q_pos = prep(q_pos_in), k_pos = prep(k_pos_in), q_neg = prep(q_neg_in),
                   k_neg = prep(k_neg_in), v = prep(v_in), gate = prep(gate_in);
  const at::Tensor mask = DgsaMaskBytes(key_padding_mask);  // undefined: all keys visible
  at::Tensor out = at::empty({q_pos.size(0), q_pos.size(1), shape.nq, shape.dv},
                             q_pos.options());
  const int err = LaunchDgsaForward(
      shape, work_type == at::kHalf ? DgsaDType::kFloat16 : DgsaDType::kFloat32,
      q_pos.data_ptr(), k_pos.data_ptr(), q_neg.data_ptr(), k_neg.data_ptr(), v.data_ptr(),
      gate.data_ptr(), DgsaMaskData(mask), out.data_ptr(),
      at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "dgsa_attention (CUDA): ", DgsaCudaErrorString(err),
              " (head dims up to ", kDgsaCudaMaxHeadDim, ")");
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CUDA, m) {
  m.impl("dgsa_attention", &gatescope::ops::DgsaAttentionCuda);
}
