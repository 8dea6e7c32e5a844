#include "server/batching/preparation_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/thread_scheduling.h"

namespace gatescope {

PreparationPool::PreparationPool(int threads, int max_waiting, std::string thread_name)
    : max_waiting_(static_cast<size_t>(max_waiting > 0 ? max_waiting : 0)) {
  absl::MutexLock lock(&join_mu_);
  for (int i = 0; i < (threads > 0 ? threads : 1); ++i) {
    threads_.emplace_back([this, thread_name] {
      if (!thread_name.empty()) NameCurrentThread(thread_name);
      Loop();
    });
  }
}

PreparationPool::~PreparationPool() { Stop(); }

absl::Status PreparationPool::Submit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("server is shutting down");
  if (tasks_.size() >= max_waiting_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("input preparation queue is full (", max_waiting_, " waiting)"));
  }
  tasks_.push_back(std::move(task));
  return absl::OkStatus();
}

int PreparationPool::Waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tasks_.size());
}

void PreparationPool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PreparationPool* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return p->stopping_ || !p->tasks_.empty();
          },
          this));
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void PreparationPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  absl::MutexLock lock(&join_mu_);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace gatescope
