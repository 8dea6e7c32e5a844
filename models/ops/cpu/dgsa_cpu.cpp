// CPU backend of gatescope::dgsa_attention: the streaming kernel run over
// (head, row-block) tasks with at::parallel_for.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "cpu/cpu_features.h"
#include "cpu/row_blocks.h"
#include "cpu/work_type.h"
#include "dgsa_op.h"
#include "gatescope/ops/dgsa_cpu_kernel.h"

namespace gatescope::ops {
namespace {

// Fixed-size loops for common head sizes, the generic kernel otherwise; IsaDispatch builds
// it once per instruction set.
struct FloatRows {
  GS_KERNEL_INLINE static void Run(const DgsaShape& s, const DgsaPointers<float>& p, int64_t bh,
                                   int64_t r0, int64_t r1) {
    const auto d = s.d, dv = s.dv;
    if (d == 8 && dv == 16) return DgsaForwardRows<float, float, 8, 16>(s, p, bh, r0, r1);
    if (d == 16 && dv == 32) return DgsaForwardRows<float, float, 16, 32>(s, p, bh, r0, r1);
    if (d == 32 && dv == 64) return DgsaForwardRows<float, float, 32, 64>(s, p, bh, r0, r1);
    if (d == 64 && dv == 64) return DgsaForwardRows<float, float, 64, 64>(s, p, bh, r0, r1);
    if (d == 64 && dv == 128) return DgsaForwardRows<float, float, 64, 128>(s, p, bh, r0, r1);
    DgsaForwardRows<float, float>(s, p, bh, r0, r1);
  }
};

void Rows(const DgsaShape& shape, const DgsaPointers<float>& ptr, int64_t bh, int64_t r0,
          int64_t r1) {
  IsaDispatch<FloatRows>::Run(shape, ptr, bh, r0, r1);
}

void Rows(const DgsaShape& shape, const DgsaPointers<double>& ptr, int64_t bh, int64_t r0,
          int64_t r1) {
  DgsaForwardRows<double, double>(shape, ptr, bh, r0, r1);
}

template <typename T>
void RunCpu(const DgsaShape& shape, const DgsaPointers<T>& ptr) {
  ForEachRowBlock(shape.batch_heads, shape.nq, [&](int64_t bh, int64_t r0, int64_t r1) {
    Rows(shape, ptr, bh, r0, r1);
  });
}

template <typename T>
DgsaPointers<T> Pointers(const at::Tensor& q_pos, const at::Tensor& k_pos,
                         const at::Tensor& q_neg, const at::Tensor& k_neg,
                         const at::Tensor& v, const at::Tensor& gate, const at::Tensor& mask,
                         at::Tensor& out) {
  DgsaPointers<T> p;
  p.q_pos = q_pos.data_ptr<T>();
  p.k_pos = k_pos.data_ptr<T>();
  p.q_neg = q_neg.data_ptr<T>();
  p.k_neg = k_neg.data_ptr<T>();
  p.v = v.data_ptr<T>();
  p.gate = gate.data_ptr<T>();
  p.out = out.data_ptr<T>();
  p.key_mask = DgsaMaskData(mask);
  return p;
}

at::Tensor DgsaAttentionCpu(const at::Tensor& q_pos_in, const at::Tensor& k_pos_in,
                            const at::Tensor& q_neg_in, const at::Tensor& k_neg_in,
                            const at::Tensor& v_in, const at::Tensor& gate_in,
                            const c10::optional<at::Tensor>& key_padding_mask) {
  const DgsaShape shape =
      CheckDgsaArgs(q_pos_in, k_pos_in, q_neg_in, k_neg_in, v_in, gate_in, key_padding_mask);
  const auto in_type = q_pos_in.scalar_type();
  const auto work_type = WorkType(in_type);  // cast back to in_type at the end
  TORCH_CHECK(at::isFloatingType(in_type), "dgsa_attention: inputs must be floating point");
  auto prep = [&](const at::Tensor& t) { return ToWork(t, work_type); };
  const at::Tensor q_pos = prep(q_pos_in), k_pos = prep(k_pos_in), q_neg = prep(q_neg_in),
                   k_neg = prep(k_neg_in), v = prep(v_in), gate = prep(gate_in);
  const at::Tensor mask = DgsaMaskBytes(key_padding_mask);  // undefined: all keys visible
  at::Tensor out = at::empty({q_pos.size(0), q_pos.size(1), shape.nq, shape.dv},
                             q_pos.options());
  if (shape.nq > 0 && shape.batch_heads > 0) {
    DispatchWork(work_type, [&](auto tag) {
      using T = decltype(tag);
      RunCpu<T>(shape, Pointers<T>(q_pos, k_pos, q_neg, k_neg, v, gate, mask, out));
    });
  }
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CPU, m) {
  m.impl("dgsa_attention", &gatescope::ops::DgsaAttentionCpu);
}
