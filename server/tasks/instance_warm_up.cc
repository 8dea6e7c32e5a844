#include "server/tasks/instance_warm_up.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/runtime/cuda_graph_policy.h"

namespace gatescope {

std::vector<WarmUpCall> WarmUpCalls(const InstanceSpec& spec) {
  constexpr int kProfilingCalls = 2;  // TorchScript's profiling run, then its optimised plan
  if (spec.kind != InstanceSpec::Kind::kGpu || !spec.cuda_graphs) {
    return {{1, kProfilingCalls}};
  }
  // The policy records a shape on the call after its warm-up calls.
  const int to_record =
      std::max(kProfilingCalls, CudaGraphPolicy::Limits{}.warm_up_calls_per_shape + 1);
  std::vector<WarmUpCall> calls;
  const int64_t largest = std::max(1, spec.max_batch_size);
  // The buckets CudaGraphPolicy::Bucket pads to: powers of two below the largest batch,
  // then the largest.
  for (int64_t bucket = 1;; bucket *= 2) {
    calls.push_back({std::min(bucket, largest), to_record});
    if (bucket >= largest) break;
  }
  return calls;
}

absl::Status WarmUp(ModelRunner& runner, const BatchAssembly& assembly,
                    const std::vector<WarmUpCall>& calls) {
  GS_ASSIGN_OR_RETURN(const at::Tensor example, assembly.WarmUpExample());
  for (const WarmUpCall& call : calls) {
    const std::vector<at::Tensor> examples(static_cast<size_t>(call.batch), example);
    GS_ASSIGN_OR_RETURN(std::vector<GatheredBatch> batches, assembly.Gather(examples));
    for (int i = 0; i < call.count; ++i) {
      for (const GatheredBatch& batch : batches) {
        absl::StatusOr<NamedTensors> out = runner.Predict(batch.inputs);
        if (!out.ok()) {
          return absl::Status(out.status().code(),
                              absl::StrCat("warm-up forward at batch ", batch.members.size(),
                                           ": ", out.status().message()));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gatescope
