// CPU backend of gatescope::plug_attention: the streaming kernel run over
// (batch, row-block) tasks with at::parallel_for. Each task covers all heads, so the
// head-shared gate is computed once per (row block, key block).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "cpu/cpu_features.h"
#include "cpu/row_blocks.h"
#include "cpu/work_type.h"
#include "gatescope/ops/plug_cpu_kernel.h"
#include "plug_op.h"

namespace gatescope::ops {
namespace {

// Fixed-size loops for common head and gate sizes, the generic kernel otherwise, for a
// float vector width of kVec (TileDots holds its sums in vectors of that width).
template <int kVec>
struct FloatRows {
  GS_KERNEL_INLINE static void Run(const PlugShape& s, const PlugPointers<float>& p,
                                   const PlugPackedKeys<float>& k, int64_t b, int64_t r0,
                                   int64_t r1) {
    const auto d = s.d, dv = s.dv, dg = s.dg;
    if (d == 64 && dv == 64 && dg == 64) {
      return PlugForwardRows<float, float, 64, 64, 64, kVec>(s, p, k, b, r0, r1);
    }
    if (d == 32 && dv == 32 && dg == 32) {
      return PlugForwardRows<float, float, 32, 32, 32, kVec>(s, p, k, b, r0, r1);
    }
    if (d == 16 && dv == 16 && dg == 16) {
      return PlugForwardRows<float, float, 16, 16, 16, kVec>(s, p, k, b, r0, r1);
    }
    PlugForwardRows<float, float, 0, 0, 0, kVec>(s, p, k, b, r0, r1);
  }
};

// Like IsaDispatch (cpu_features.h), except that the two builds differ in their vector
// width as well as in their instruction set: 8 floats (ymm) for AVX2+FMA, 4 (xmm) for the
// baseline.
#if GS_HAVE_AVX2_PATH
GS_TARGET_AVX2 void RowsAvx2(const PlugShape& shape, const PlugPointers<float>& ptr,
                             const PlugPackedKeys<float>& packed, int64_t b, int64_t r0,
                             int64_t r1) {
  FloatRows<8>::Run(shape, ptr, packed, b, r0, r1);
}
#endif

void RowsBaseline(const PlugShape& shape, const PlugPointers<float>& ptr,
                  const PlugPackedKeys<float>& packed, int64_t b, int64_t r0, int64_t r1) {
  FloatRows<4>::Run(shape, ptr, packed, b, r0, r1);
}

void Rows(const PlugShape& shape, const PlugPointers<float>& ptr,
          const PlugPackedKeys<float>& packed, int64_t b, int64_t r0, int64_t r1) {
#if GS_HAVE_AVX2_PATH
  if (UseAvx2()) return RowsAvx2(shape, ptr, packed, b, r0, r1);
#endif
  RowsBaseline(shape, ptr, packed, b, r0, r1);
}

void Rows(const PlugShape& shape, const PlugPointers<double>& ptr,
          const PlugPackedKeys<double>& packed, int64_t b, int64_t r0, int64_t r1) {
  PlugForwardRows<double, double>(shape, ptr, packed, b, r0, r1);
}

template <typename T>
void RunCpu(const PlugShape& shape, const PlugPointers<T>& ptr,
            const at::TensorOptions& options) {
  // Pack every head's keys and every batch element's gate keys once (O(M d) memory).
  const int64_t blocks = PlugKeyBlocks(shape.nk);
  const at::Tensor packed_keys =
      at::empty({shape.batch * shape.heads * blocks * shape.d * kKeyBlock}, options);
  const at::Tensor packed_gate_keys =
      at::empty({shape.batch * blocks * shape.dg * kKeyBlock}, options);
  T* keys = packed_keys.data_ptr<T>();
  T* gate_keys = packed_gate_keys.data_ptr<T>();
  at::parallel_for(0, shape.batch * (shape.heads + 1), 1, [&](int64_t begin, int64_t end) {
    for (int64_t slice = begin; slice < end; ++slice) {
      PlugPackSlice(shape, ptr, slice, keys, gate_keys);
    }
  });
  const PlugPackedKeys<T> packed{keys, gate_keys};
  // A task holds all heads of its rows, so there are few tasks for one short sequence
  // (batch 1, N = 197: 7 of 32 rows): halve the block when that leaves threads idle or
  // unbalanced. Each row's result does not depend on the split.
  int64_t block = kRowBlock;
  const int64_t threads = at::get_num_threads();
  while (block > 8 && shape.batch * ((shape.nq + block - 1) / block) < 4 * threads) block /= 2;
  ForEachBlock(shape.batch, shape.nq, block, [&](int64_t b, int64_t r0, int64_t r1) {
    Rows(shape, ptr, packed, b, r0, r1);
  });
}

at::Tensor PlugAttentionCpu(const at::Tensor& q_in, const at::Tensor& k_in,
                            const at::Tensor& v_in, const at::Tensor& q_gate_in,
                            const at::Tensor& k_gate_in, const at::Tensor& gml_weight,
                            const at::Tensor& gml_bias, double scale, double gate_scale,
                            bool tanh_gate) {
  PlugShape shape = CheckPlugArgs(q_in, k_in, v_in, q_gate_in, k_gate_in, gml_weight, gml_bias,
                                  scale, gate_scale, tanh_gate);
  // The four gml values, read once (in double, so the float64 path loses nothing).
  const at::Tensor gml = PlugGmlParams(gml_weight, gml_bias, at::kDouble);
  const double* g = gml.data_ptr<double>();
  shape.w_a = g[0];
  shape.w_b = g[1];
  shape.b_a = g[2];
  shape.b_b = g[3];
  const auto in_type = q_in.scalar_type();
  const auto work_type = WorkType(in_type);  // cast back to in_type at the end
  auto prep = [&](const at::Tensor& t) { return ToWork(t, work_type); };
  const at::Tensor q = prep(q_in), k = prep(k_in), v = prep(v_in), qg = prep(q_gate_in),
                   kg = prep(k_gate_in);
  at::Tensor out = at::empty({shape.batch, shape.heads, shape.nq, shape.dv}, q.options());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    PlugPointers<T> p;
    p.q = q.data_ptr<T>();
    p.k = k.data_ptr<T>();
    p.v = v.data_ptr<T>();
    p.q_gate = qg.data_ptr<T>();
    p.k_gate = kg.data_ptr<T>();
    p.out = out.data_ptr<T>();
    RunCpu<T>(shape, p, q.options());
  };
  if (out.numel() > 0) {
    DispatchWork(work_type, run);
  }
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CPU, m) {
  m.impl("plug_attention", &gatescope::ops::PlugAttentionCpu);
}
