// CPU backend of gatescope::ms_deform_attn: the header kernel run over (batch item,
// query-block) tasks with at::parallel_for.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "cpu/cpu_features.h"
#include "cpu/row_blocks.h"
#include "cpu/work_type.h"
#include "gatescope/ops/ms_deform_cpu_kernel.h"
#include "ms_deform_op.h"

namespace gatescope::ops {
namespace {

// Fixed-size channel loops for common head sizes, the generic kernel otherwise; IsaDispatch
// builds each once per instruction set.
struct FloatQueries {
  GS_KERNEL_INLINE static void Run(const MsDeformShape& s, const MsDeformPointers<float>& p,
                                   int64_t n, int64_t q0, int64_t q1) {
    switch (s.channels) {
      case 16: return MsDeformForwardQueries<float, float, 16>(s, p, n, q0, q1);
      case 32: return MsDeformForwardQueries<float, float, 32>(s, p, n, q0, q1);
      case 64: return MsDeformForwardQueries<float, float, 64>(s, p, n, q0, q1);
      default: return MsDeformForwardQueries<float, float>(s, p, n, q0, q1);
    }
  }
};

void Queries(const MsDeformShape& s, const MsDeformPointers<float>& p, int64_t n, int64_t q0,
             int64_t q1) {
  IsaDispatch<FloatQueries>::Run(s, p, n, q0, q1);
}

void Queries(const MsDeformShape& s, const MsDeformPointers<double>& p, int64_t n, int64_t q0,
             int64_t q1) {
  MsDeformForwardQueries<double, double>(s, p, n, q0, q1);
}

at::Tensor MsDeformAttnCpu(const at::Tensor& value_in, const at::Tensor& spatial_shapes_in,
                           const at::Tensor& level_start_in, const at::Tensor& locations_in,
                           const at::Tensor& weights_in) {
  const MsDeformShape shape =
      CheckMsDeformArgs(value_in, spatial_shapes_in, level_start_in, locations_in, weights_in);
  const auto in_type = value_in.scalar_type();
  const auto work_type = WorkType(in_type);  // cast back to in_type at the end
  auto prep = [&](const at::Tensor& t) { return ToWork(t, work_type); };
  const at::Tensor value = prep(value_in), locations = prep(locations_in),
                   weights = prep(weights_in);
  const at::Tensor spatial_shapes = spatial_shapes_in.contiguous(),
                   level_start = level_start_in.contiguous();
  at::Tensor out =
      at::empty({shape.batch, shape.queries, shape.heads * shape.channels}, value.options());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    MsDeformPointers<T> p;
    p.value = value.data_ptr<T>();
    p.spatial_shapes = spatial_shapes.data_ptr<int64_t>();
    p.level_start = level_start.data_ptr<int64_t>();
    p.sampling_locations = locations.data_ptr<T>();
    p.attention_weights = weights.data_ptr<T>();
    p.out = out.data_ptr<T>();
    ForEachRowBlock(shape.batch, shape.queries,
                    [&](int64_t n, int64_t q0, int64_t q1) { Queries(shape, p, n, q0, q1); });
  };
  if (out.numel() > 0) {
    DispatchWork(work_type, run);
  }
  return out.to(in_type);
}

}  // namespace
}  // namespace gatescope::ops

TORCH_LIBRARY_IMPL(gatescope, CPU, m) {
  m.impl("ms_deform_attn", &gatescope::ops::MsDeformAttnCpu);
}
