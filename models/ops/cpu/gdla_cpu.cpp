// CPU backend of gatescope::gdla_attention: key summaries built over (head, token-chunk)
// tasks and summed per head in chunk order, then the rows over (head, row-block) tasks, all
// with at::parallel_for.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/row_blocks.h"
#include "cpu/work_type.h"
#include "gatescope/ops/gdla_cpu_kernel.h"
#include "gdla_op.h"

namespace gatescope::ops {
namespace {

// Token chunks of the summary pass: at least kMinChunk tokens and at most kMaxChunks chunks
// per head slice. The split depends only on N, so results do not depend on the thread
// count.
constexpr int64_t kMinChunk = 512;
constexpr int64_t kMaxChunks = 16;

int64_t SummaryChunk(int64_t n) {
  return std::max(kMinChunk, (n + kMaxChunks - 1) / kMaxChunks);
}

// Fixed-size loops for common head sizes, the generic kernel otherwise; IsaDispatch builds
// each once per instruction set.
struct FloatSummary {
  GS_KERNEL_INLINE static void Run(const GdlaShape& s, const GdlaPointers<float>& p, int64_t bh,
                                   int64_t m0, int64_t m1, float* out) {
    switch (s.dim) {
      case 16: return GdlaAccumulateSummary<float, float, 16>(s, p, bh, m0, m1, out);
      case 32: return GdlaAccumulateSummary<float, float, 32>(s, p, bh, m0, m1, out);
      case 64: return GdlaAccumulateSummary<float, float, 64>(s, p, bh, m0, m1, out);
      case 128: return GdlaAccumulateSummary<float, float, 128>(s, p, bh, m0, m1, out);
      default: return GdlaAccumulateSummary<float, float>(s, p, bh, m0, m1, out);
    }
  }
};

struct FloatRows {
  GS_KERNEL_INLINE static void Run(const GdlaShape& s, const GdlaPointers<float>& p,
                                   const float* summary, int64_t bh, int64_t r0, int64_t r1) {
    switch (s.dim) {
      case 16: return GdlaForwardRows<float, float, 16>(s, p, summary, bh, r0, r1);
      case 32: return GdlaForwardRows<float, float, 32>(s, p, summary, bh, r0, r1);
      case 64: return GdlaForwardRows<float, float, 64>(s, p, summary, bh, r0, r1);
      case 128: return GdlaForwardRows<float, float, 128>(s, p, summary, bh, r0, r1);
      default: return GdlaForwardRows<float, float>(s, p, summary, bh, r0, r1);
    }
  }
};

void Summary(const GdlaShape& shape, const GdlaPointers<float>& ptr, int64_t bh, int64_t m0,
             int64_t m1, float* out) {
  IsaDispatch<FloatSummary>::Run(shape, ptr, bh, m0, m1, out);
}

void Summary(const GdlaShape& shape, const GdlaPointers<double>& ptr, int64_t bh, int64_t m0,
             int64_t m1, double* out) {
  GdlaAccumulateSummary<double, double>(shape, ptr, bh, m0, m1, out);
}

void Rows(const GdlaShape& shape, const GdlaPointers<float>& ptr, const float* summary,
          int64_t bh, int64_t r0, int64_t r1) {
  IsaDispatch<FloatRows>::Run(shape, ptr, summary, bh, r0, r1);
}

void Rows(const GdlaShape& shape, const GdlaPointers<double>& ptr, const double* summary,
          int64_t bh, int64_t r0, int64_t r1) {
  GdlaForwardRows<double, double>(shape, ptr, summary, bh, r0, r1);
}

template <typename T>
void RunCpu(const GdlaShape& shape, const GdlaPointers<T>& ptr) {
  const int64_t slices = shape.batch * shape.heads, size = GdlaSummarySize(shape.dim);
  const int64_t chunk = SummaryChunk(shape.n), chunks = (shape.n + chunk - 1) / chunk;
  // Per slice, one partial summary per chunk; the chunk sums end in the first one.
  std::vector<T> partial(slices * chunks * size, T(0));
  auto slot = [&](int64_t bh, int64_t c) { return partial.data() + (bh * chunks + c) * size; };
  ForEachBlock(slices, shape.n, chunk, [&](int64_t bh, int64_t m0, int64_t m1) {
    Summary(shape, ptr, bh, m0, m1, slot(bh, m0 / chunk));
  });
  if (chunks > 1) {
    at::parallel_for(0, slices, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        T* total = slot(bh, 0);
        for (int64_t c = 1; c < chunks; ++c) {
          const T* part = slot(bh, c);
          for (int64_t i = 0; i < size; ++i) total[i] += part[i];
        }
      }
    });
  }
  ForEachRowBlock(slices, shape.n, [&](int64_t bh, int64_t r0, int64_t r1) {
    Rows(shape, ptr, slot(bh, 0), bh, r0, r1);
  });
}

at::Tensor GdlaAttentionCpu(const at::Tensor& q_in, const at::Tensor& k_in,
                            const at::Tensor& v_in, const at::Tensor& g_in,
                            const at::Tensor& lam_in,
                            const c10::optional<at::Tensor>& norm_weight, double eps,
                            int64_t gate) {
  const GdlaShape shape = CheckGdlaArgs(q_in, k_in, v_in, g_in, lam_in, norm_weight, eps, gate);
  const auto in_type = q_in.scalar_type();
  const auto work_type = WorkType(in_type);  // cast back to in_type at the end
  auto prep = [&](const at::Tensor& t) { return ToWork(t, work_type); };
  const at::Tensor q = prep(q_in), k = prep(k_in), v = prep(v_in), g = prep(g_in),
                   lam = prep(lam_in);
  const at::Tensor weight = GdlaNormWeight(norm_weight, work_type);
  at::Tensor out = at::empty(q.sizes(), q.options());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    GdlaPointers<T> p;
    p.q = q.data_ptr<T>();
    p.k = k.data_ptr<T>();
    p.v = v.data_ptr<T>();
    p.g = g.data_ptr<T>();
    p.lam = lam.data_ptr<T>();
    p.norm_weight = weight.defined() ? weight.data_ptr<T>() : nullptr;
    p.out = out.data_ptr<T>();
    RunCpu<T>(shape, p);
  };
  if (shape.n > 0 && shape.batch * shape.heads > 0) {
    DispatchWork(work_type, run);
  }
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CPU, m) {
  m.impl("gdla_attention", &gatescope::ops::GdlaAttentionCpu);
}
