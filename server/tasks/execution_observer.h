// What a model instance reports about its executions, for metrics. Implementations must
// be thread-safe and non-blocking: calls come from every instance's worker thread.
#pragma once

#include "absl/time/time.h"
#include "server/runtime/named_tensors.h"

namespace gatescope {

class ExecutionObserver {
 public:
  virtual ~ExecutionObserver() = default;
  // One successful runner call: preparing its `batch_size` inputs, running it, slicing its
  // outputs per request. Called before any of those requests is answered.
  virtual void Executed(int batch_size, absl::Duration input, absl::Duration infer,
                        absl::Duration output) = 0;
  // The outputs [B, ...] of one successful prediction call, e.g. for statistics of the
  // served inputs. Must not keep references to the tensors' storage beyond the call.
  virtual void Outputs(const NamedTensors& outputs) { (void)outputs; }
};

}  // namespace gatescope
