#include "server/frontend/core/control_queue.h"

#include <utility>

namespace gatescope {

ControlQueue::ControlQueue(size_t max_waiting)
    : max_waiting_(max_waiting), thread_([this] { Loop(); }) {}

ControlQueue::~ControlQueue() {
  std::deque<Work> left;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    left.swap(waiting_);
  }
  for (Work& work : left) work(false);
  thread_.join();
}

bool ControlQueue::Submit(Work work) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || waiting_.size() >= max_waiting_) return false;
  waiting_.push_back(std::move(work));
  return true;
}

void ControlQueue::Loop() {
  for (;;) {
    Work work;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !waiting_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (waiting_.empty()) return;  // stopping, nothing left
      work = std::move(waiting_.front());
      waiting_.pop_front();
    }
    work(true);
  }
}

}  // namespace gatescope
