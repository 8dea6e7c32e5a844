// The server-wide threads that prepare jobs' inputs (decode images) before the jobs are
// queued on their models. Bounded twice: `threads` tasks run at once (so decode memory is
// at most threads x one image's decode) and at most `max_waiting` wait (RESOURCE_EXHAUSTED
// beyond: the caller refuses the job, see PreparingScheduler for a call's jobs).
// Torch-free; knows only closures.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace gatescope {

class PreparationPool {
 public:
  // Starts `threads` (>= 1) threads, named `thread_name` when not empty (/proc, top -H).
  // INVALID_ARGUMENT-free: callers validate the numbers.
  PreparationPool(int threads, int max_waiting, std::string thread_name = "");
  // Stop().
  ~PreparationPool();
  PreparationPool(const PreparationPool&) = delete;
  PreparationPool& operator=(const PreparationPool&) = delete;

  // Queues `task` to run on a pool thread. RESOURCE_EXHAUSTED when `max_waiting` tasks
  // already wait, UNAVAILABLE after Stop; `task` is then dropped unrun (the caller
  // refuses its job). Non-blocking, thread-safe. `task` must not throw.
  absl::Status Submit(std::function<void()> task);
  // Tasks queued and not yet started. Thread-safe.
  int Waiting() const;
  // Refuses new tasks, runs every queued one, joins the threads. Idempotent, blocking.
  void Stop();

 private:
  void Loop();

  const size_t max_waiting_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex join_mu_;  // serialises Stop() callers around the joins
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace gatescope
