#include "server/repository/version_statistics.h"

namespace gatescope {

void VersionStatistics::Finished(bool ok, int examples, absl::Duration took, absl::Time now) {
  absl::MutexLock lock(&mu_);
  (ok ? s_.success : s_.fail).Add(static_cast<uint64_t>(examples), took);
  s_.last_inference_ms = static_cast<uint64_t>(absl::ToUnixMillis(now));
}

void VersionStatistics::Dequeued(absl::Duration waited) {
  absl::MutexLock lock(&mu_);
  s_.queue.Add(1, waited);
}

void VersionStatistics::Executed(int batch_size, absl::Duration input, absl::Duration infer,
                                 absl::Duration output) {
  const auto n = static_cast<uint64_t>(batch_size);
  absl::MutexLock lock(&mu_);
  s_.inference_count += n;
  s_.execution_count += 1;
  s_.compute_input.Add(n, input);
  s_.compute_infer.Add(n, infer);
  s_.compute_output.Add(n, output);
  StatisticsSnapshot::Batch& b = s_.batches[batch_size];
  b.compute_input.Add(1, input);
  b.compute_infer.Add(1, infer);
  b.compute_output.Add(1, output);
}

StatisticsSnapshot VersionStatistics::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return s_;
}

}  // namespace gatescope
