// Warm-up of a model instance before it serves. TorchScript's profiling executor profiles
// a forward on its first call and optimises it on the second: the shipped models' first two
// forwards took 28-150 ms each on the CPU, against 0.5-6 ms from the third on
// (docs/performance.md, "Warm-up before a model serves"). Without a warm-up the first
// requests after every load pay that. A GPU instance with CUDA graphs also records a graph
// per batch bucket on the call after its warm-up calls (CudaGraphPolicy); warming every
// bucket records them all before the first request.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "server/config/instance_spec.h"
#include "server/runtime/model_runner.h"
#include "server/tasks/batch_assembly.h"

namespace gatescope {

struct WarmUpCall {
  int64_t batch = 1;
  int count = 1;  // calls of this batch size, in a row
};

// What an instance runs before it serves: batch 1 twice; with CUDA graphs on a GPU
// instance, each bucket up to `spec.max_batch_size` (1, 2, 4, ..., and the largest) as
// many times as it takes to record its graph.
std::vector<WarmUpCall> WarmUpCalls(const InstanceSpec& spec);

// Runs `calls` on `runner` with `assembly`'s warm-up example, gathered as requests are.
// Blocks for the forwards; `runner` must not be in use by anything else yet. Returns the
// first failure (the model rejecting the all-zero example, say), after which no more calls
// are made; UNIMPLEMENTED when the task has no warm-up example.
absl::Status WarmUp(ModelRunner& runner, const BatchAssembly& assembly,
                    const std::vector<WarmUpCall>& calls);

}  // namespace gatescope
