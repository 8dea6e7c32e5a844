// One model version's cumulative statistics, as KServe ModelStatistics reports them
// (Triton's InferStatistics and InferBatchStatistics). Kept per loaded version, apart from
// the Prometheus series (labelled by model name only). Thread-safe.
//
// Units: every count of the inference statistics counts examples (a KServe call of N
// examples counts N, and each of them carries the call's latency, its own queue wait and
// its batch's compute times); the batch statistics count executions per batch size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gatescope {

struct DurationTotal {
  uint64_t count = 0;
  uint64_t ns = 0;
  // `each` below zero (the wall clock stepped back) counts as zero.
  void Add(uint64_t n, absl::Duration each) {
    count += n;
    ns += n * static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(each)));
  }
};

struct StatisticsSnapshot {
  DurationTotal success, fail, queue, compute_input, compute_infer, compute_output;
  uint64_t inference_count = 0;  // examples executed
  uint64_t execution_count = 0;  // model executions
  uint64_t last_inference_ms = 0;  // completion of the last call, ms since the epoch
  struct Batch {
    DurationTotal compute_input, compute_infer, compute_output;
  };
  std::map<int, Batch> batches;  // by batch size
};

class VersionStatistics {
 public:
  // A call of `examples` examples finished after `took`, at `now`.
  void Finished(bool ok, int examples, absl::Duration took, absl::Time now);
  // One example waited `waited` in the queue.
  void Dequeued(absl::Duration waited);
  // One execution of `batch_size` examples: gather (`input`), forward (`infer`), replies
  // (`output`), each for the whole batch.
  void Executed(int batch_size, absl::Duration input, absl::Duration infer,
                absl::Duration output);

  StatisticsSnapshot Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  StatisticsSnapshot s_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope
