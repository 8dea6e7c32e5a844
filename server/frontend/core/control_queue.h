// Model-control calls (RepositoryModelLoad / Unload) run one at a time on one thread of their
// own, with a bounded number waiting: the repository serialises control anyway, so more
// threads would only pile up blocked, and an unbounded number of callers could exhaust the
// process' threads.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gatescope {

class ControlQueue {
 public:
  // A call's work: run(true) on the control thread in arrival order, or run(false) when the
  // queue stops before its turn, so that every accepted call is answered exactly once.
  using Work = std::function<void(bool run)>;

  explicit ControlQueue(size_t max_waiting);
  // Lets the call that is running finish, answers the waiting ones run(false), joins.
  ~ControlQueue();

  ControlQueue(const ControlQueue&) = delete;
  ControlQueue& operator=(const ControlQueue&) = delete;

  // Queues `work`; false, leaving `work` uncalled, when max_waiting calls already wait or
  // the queue has stopped. Thread-safe; never blocks on the running call.
  bool Submit(Work work);

 private:
  void Loop();

  const size_t max_waiting_;
  absl::Mutex mu_;
  std::deque<Work> waiting_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gatescope
