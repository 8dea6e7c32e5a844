// Keeps a repository in step with its directory: one owned thread polls it every
// interval, waiting through the injected clock (so tests step it with simulated time).
#pragma once

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/repository/model_repository.h"

namespace gatescope {

class RepositoryPoller {
 public:
  // Starts polling `repository` every `interval` (> 0). `repository` and `clock` are not
  // owned and must outlive the poller.
  RepositoryPoller(ModelRepository* repository, absl::Duration interval, const Clock* clock);
  // Stops.
  ~RepositoryPoller();

  // Wakes the thread and joins it (waits for a poll in progress). Idempotent.
  void Stop();

  // Polls completed so far. Thread-safe.
  int polls() const;

 private:
  void Run();

  ModelRepository* const repository_;
  const absl::Duration interval_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int polls_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace gatescope
