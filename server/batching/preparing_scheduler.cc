#include "server/batching/preparing_scheduler.h"

#include <algorithm>
#include <utility>

namespace gatescope {

PreparingScheduler::PreparingScheduler(PreparationPool* pool, const Clock* clock,
                                       std::unique_ptr<Scheduler> next)
    : pool_(pool), clock_(clock), next_(std::move(next)) {}

SchedulerFactory PreparingScheduler::Wrap(PreparationPool* pool, const Clock* clock,
                                          SchedulerFactory next) {
  return [pool, clock, next = std::move(next)](
             std::vector<Executor*> instances, const DynamicBatchingConfig& config,
             QueueObserver* observer) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
    auto inner = next(std::move(instances), config, observer);
    if (!inner.ok()) return inner.status();
    return std::unique_ptr<Scheduler>(
        std::make_unique<PreparingScheduler>(pool, clock, *std::move(inner)));
  };
}

PreparingScheduler::~PreparingScheduler() { Stop(); }

absl::Status PreparingScheduler::Enqueue(WorkItem item) {
  if (!item.job->prepares_ahead()) return next_->Enqueue(std::move(item));
  if (item.job->prepares_on_caller()) {
    if (absl::Status st = item.job->PrepareAhead(); !st.ok()) {
      item.job->Refuse(st);
      return st;
    }
    return next_->Enqueue(std::move(item));
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      absl::Status st = absl::UnavailableError("model is shutting down");
      item.job->Refuse(st);
      return st;
    }
    ++preparing_;
  }
  // std::function needs a copyable closure; the item itself moves once, to Prepare.
  auto shared = std::make_shared<WorkItem>(std::move(item));
  absl::Status st = pool_->Submit([this, shared] { Prepare(std::move(*shared)); });
  if (!st.ok()) {
    shared->job->Refuse(st);
    Prepared();
  }
  return st;
}

absl::Status PreparingScheduler::EnqueueGroup(std::vector<WorkItem> items) {
  const bool on_caller = std::all_of(items.begin(), items.end(), [](const WorkItem& item) {
    return !item.job->prepares_ahead() || item.job->prepares_on_caller();
  });
  if (!on_caller) return Scheduler::EnqueueGroup(std::move(items));
  for (WorkItem& item : items) {
    if (!item.job->prepares_ahead()) continue;
    if (absl::Status st = item.job->PrepareAhead(); !st.ok()) {
      for (WorkItem& refused : items) refused.job->Refuse(st);
      return st;
    }
  }
  return next_->EnqueueGroup(std::move(items));
}

void PreparingScheduler::Prepare(WorkItem item) {
  absl::Status st;
  if (clock_->Now() >= item.deadline) {
    st = absl::DeadlineExceededError("deadline passed while the input waited for preparation");
  } else if (item.cancelled && item.cancelled()) {
    st = absl::CancelledError("request cancelled while its input waited for preparation");
  } else {
    st = item.job->PrepareAhead();
  }
  if (st.ok()) {
    next_->Enqueue(std::move(item)).IgnoreError();  // a refusal has finished the job
  } else {
    item.job->Refuse(st);
  }
  Prepared();
}

void PreparingScheduler::Prepared() {
  absl::MutexLock lock(&mu_);
  --preparing_;
}

void PreparingScheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &preparing_));
  }
  next_->Stop();
}

int PreparingScheduler::QueueDepth() const {
  int preparing;
  {
    absl::MutexLock lock(&mu_);
    preparing = preparing_;
  }
  return preparing + next_->QueueDepth();
}

}  // namespace gatescope
