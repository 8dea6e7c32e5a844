// CPU backend of gatescope::dgsa_attention: the streaming kernel run over
// (head, row-block) tasks with at::parallel_for.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "dgsa_op.h"
#include "gatescope/ops/dgsa_cpu_kernel.h"

namespace gatescope::ops {
namespace {

constexpr int64_t kRowBlock = 32;

template <typename T, typename Acc>
void RunCpu(const DgsaShape& shape, const DgsaPointers<T>& ptr) {
  const int64_t row_blocks = (shape.nq + kRowBlock - 1) / kRowBlock;
  at::parallel_for(0, shape.batch_heads * row_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / row_blocks;
      const int64_t r0 = (task % row_blocks) * kRowBlock;
      DgsaForwardRows<T, Acc>(shape, ptr, bh, r0, std::min(shape.nq, r0 + kRowBlock));
    }
  });
}

template <typename T>
DgsaPointers<T> Pointers(const at::Tensor& q_pos, const at::Tensor& k_pos,
                         const at::Tensor& q_neg, const at::Tensor& k_neg,
                         const at::Tensor& v, const at::Tensor& gate, at::Tensor& out) {
  DgsaPointers<T> p;
  p.q_pos = q_pos.data_ptr<T>();
  p.k_pos = k_pos.data_ptr<T>();
  p.q_neg = q_neg.data_ptr<T>();
  p.k_neg = k_neg.data_ptr<T>();
  p.v = v.data_ptr<T>();
  p.gate = gate.data_ptr<T>();
  p.out = out.data_ptr<T>();
  return p;
}

at::Tensor DgsaAttentionCpu(const at::Tensor& q_pos_in, const at::Tensor& k_pos_in,
                            const at::Tensor& q_neg_in, const at::Tensor& k_neg_in,
                            const at::Tensor& v_in, const at::Tensor& gate_in) {
  const DgsaShape shape = CheckDgsaArgs(q_pos_in, k_pos_in, q_neg_in, k_neg_in, v_in, gate_in);
  const auto in_type = q_pos_in.scalar_type();
  // Reduced precision runs in float and is cast back.
  const auto work_type = (in_type == at::kDouble) ? at::kDouble : at::kFloat;
  TORCH_CHECK(at::isFloatingType(in_type), "dgsa_attention: inputs must be floating point");
  auto prep = [&](const at::Tensor& t) { return t.to(work_type).contiguous(); };
  const at::Tensor q_pos = prep(q_pos_in), k_pos = prep(k_pos_in), q_neg = prep(q_neg_in),
                   k_neg = prep(k_neg_in), v = prep(v_in), gate = prep(gate_in);
  at::Tensor out = at::empty({q_pos.size(0), q_pos.size(1), shape.nq, shape.dv},
                             q_pos.options());
  if (shape.nq > 0 && shape.batch_heads > 0) {
    if (work_type == at::kDouble) {
      RunCpu<double, double>(shape, Pointers<double>(q_pos, k_pos, q_neg, k_neg, v, gate, out));
    } else {
      RunCpu<float, float>(shape, Pointers<float>(q_pos, k_pos, q_neg, k_neg, v, gate, out));
    }
  }
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CPU, m) {
  m.impl("dgsa_attention", &gatescope::ops::DgsaAttentionCpu);
}
