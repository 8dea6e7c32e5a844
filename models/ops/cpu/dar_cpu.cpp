// CPU backend of gatescope::dar_attention: the streaming kernel run over
// (head, row-block) tasks with at::parallel_for.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "cpu/cpu_features.h"
#include "cpu/row_blocks.h"
#include "cpu/work_type.h"
#include "dar_op.h"
#include "gatescope/ops/dar_cpu_kernel.h"

namespace gatescope::ops {
namespace {

// Fixed-size loops for common head sizes, the generic kernel otherwise; IsaDispatch builds
// it once per instruction set.
struct FloatRows {
  GS_KERNEL_INLINE static void Run(const DarShape& s, const DarPointers<float>& p, int64_t bh,
                                   int64_t r0, int64_t r1) {
    const auto d = s.d, dv = s.dv;
    if (d == 16 && dv == 16) return DarForwardRows<float, float, 16, 16>(s, p, bh, r0, r1);
    if (d == 32 && dv == 32) return DarForwardRows<float, float, 32, 32>(s, p, bh, r0, r1);
    if (d == 64 && dv == 64) return DarForwardRows<float, float, 64, 64>(s, p, bh, r0, r1);
    if (d == 8 && dv == 16) return DarForwardRows<float, float, 8, 16>(s, p, bh, r0, r1);
    DarForwardRows<float, float>(s, p, bh, r0, r1);
  }
};

void Rows(const DarShape& shape, const DarPointers<float>& ptr, int64_t bh, int64_t r0,
          int64_t r1) {
  IsaDispatch<FloatRows>::Run(shape, ptr, bh, r0, r1);
}

void Rows(const DarShape& shape, const DarPointers<double>& ptr, int64_t bh, int64_t r0,
          int64_t r1) {
  DarForwardRows<double, double>(shape, ptr, bh, r0, r1);
}

template <typename T>
void RunCpu(const DarShape& shape, const DarPointers<T>& ptr) {
  ForEachRowBlock(shape.batch * shape.heads, shape.nq, [&](int64_t bh, int64_t r0, int64_t r1) {
    Rows(shape, ptr, bh, r0, r1);
  });
}

std::tuple<at::Tensor, at::Tensor> DarAttentionCpu(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const c10::optional<at::Tensor>& key_padding_mask, bool causal, double lam, double rho,
    double alpha, double beta, int64_t steps) {
  const DarShape shape =
      CheckDarArgs(q_in, k_in, v_in, key_padding_mask, {causal, lam, rho, alpha, beta, steps});
  const auto in_type = q_in.scalar_type();
  const auto work_type = WorkType(in_type);  // cast back to in_type at the end
  auto prep = [&](const at::Tensor& t) { return ToWork(t, work_type); };
  const at::Tensor q = prep(q_in), k = prep(k_in), v = prep(v_in);
  const at::Tensor mask = DarMaskBytes(key_padding_mask);
  at::Tensor out = at::empty({shape.batch, shape.heads, shape.nq, shape.dv}, q.options());
  at::Tensor row_stats =
      at::zeros({shape.batch, shape.heads, shape.nq, 2}, q.options().dtype(at::kFloat));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    DarPointers<T> p;
    p.q = q.data_ptr<T>();
    p.k = k.data_ptr<T>();
    p.v = v.data_ptr<T>();
    p.key_mask = mask.defined() ? mask.data_ptr<uint8_t>() : nullptr;
    p.out = out.data_ptr<T>();
    p.row_stats = row_stats.data_ptr<float>();
    RunCpu<T>(shape, p);
  };
  if (shape.nq > 0 && shape.batch * shape.heads > 0) {
    DispatchWork(work_type, run);
  }
  return {out.to(in_type), DarCrossingFraction(row_stats, in_type)};
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CPU, m) {
  m.impl("dar_attention", &gatescope::ops::DarAttentionCpu);
}
