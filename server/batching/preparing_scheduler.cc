#include "server/batching/preparing_scheduler.h"

#include <memory>
#include <utility>
#include <vector>

namespace gatescope {
namespace {

void RefuseAll(std::vector<WorkItem>& items, const absl::Status& status) {
  for (WorkItem& item : items) item.job->Refuse(status);
}

}  // namespace

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

// A call's jobs while some are prepared on the pool. Each pool task prepares its own job
// (no two touch the same one); the lock orders their ends, and whoever ends last (a task,
// or the caller done submitting) takes the jobs to hand them on.
class PreparingScheduler::Group {
 public:
  // `holds`: the pool tasks to come, plus one for the caller while it submits them.
  Group(std::vector<WorkItem> items, int holds) : items_(std::move(items)), holds_(holds) {}

  WorkItem& item(size_t i) { return items_[i]; }

  // Ends `n` holds, the first failure kept (or, `overrides`, this one: the status the
  // caller returned when the pool refused the group); true for whoever ended the last
  // hold, which then owns the jobs (TakeItems) and the group's failure.
  bool End(const absl::Status& status, int n = 1, bool overrides = false) {
    absl::MutexLock lock(&mu_);
    if (failure_.ok() || overrides) failure_ = status;
    holds_ -= n;
    return holds_ == 0;
  }
  std::vector<WorkItem> TakeItems() { return std::move(items_); }
  absl::Status failure() const {
    absl::MutexLock lock(&mu_);
    return failure_;
  }

 private:
  std::vector<WorkItem> items_;
  mutable absl::Mutex mu_;
  int holds_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

absl::Status PreparingScheduler::EnqueueGroup(std::vector<WorkItem> items) {
  std::vector<size_t> for_pool;
  for (size_t i = 0; i < items.size(); ++i) {
    WorkItem& item = items[i];
    if (!item.job->prepares_ahead()) continue;
    if (!item.job->prepares_on_caller()) {
      for_pool.push_back(i);
      continue;
    }
    if (absl::Status st = item.job->PrepareAhead(); !st.ok()) {
      RefuseAll(items, st);
      return st;
    }
  }
  if (for_pool.empty()) return next_->EnqueueGroup(std::move(items));
  const int jobs = static_cast<int>(items.size());
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      absl::Status st = absl::UnavailableError("model is shutting down");
      RefuseAll(items, st);
      return st;
    }
    preparing_ += jobs;
  }
  auto group = std::make_shared<Group>(std::move(items), static_cast<int>(for_pool.size()) + 1);
  absl::Status submitted;
  for (size_t k = 0; k < for_pool.size(); ++k) {
    const size_t i = for_pool[k];
    submitted = pool_->Submit([this, group, i] {
      // A group that has failed is refused whole: its other inputs need no decode.
      const absl::Status st =
          group->failure().ok() ? PrepareOnPool(group->item(i)) : absl::OkStatus();
      if (group->End(st)) HandOn(group->TakeItems(), group->failure());
    });
    if (!submitted.ok()) {
      // This task and the later ones never run: their holds end here, with the caller's,
      // and the group is refused with the status returned.
      if (group->End(submitted, static_cast<int>(for_pool.size() - k) + 1,
                     /*overrides=*/true)) {
        HandOn(group->TakeItems(), submitted);
      }
      return submitted;
    }
  }
  if (group->End(absl::OkStatus())) HandOn(group->TakeItems(), group->failure());
  return absl::OkStatus();
}

void PreparingScheduler::HandOn(std::vector<WorkItem> items, const absl::Status& failure) {
  const int jobs = static_cast<int>(items.size());
  if (failure.ok()) {
    next_->EnqueueGroup(std::move(items)).IgnoreError();  // a refusal has finished the jobs
  } else {
    RefuseAll(items, failure);
  }
  Prepared(jobs);
}

absl::Status PreparingScheduler::PrepareOnPool(WorkItem& item) const {
  if (clock_->Now() >= item.deadline) {
    return absl::DeadlineExceededError("deadline passed while the input waited for preparation");
  }
  if (item.cancelled && item.cancelled()) {
    return absl::CancelledError("request cancelled while its input waited for preparation");
  }
  return item.job->PrepareAhead();
}

void PreparingScheduler::Prepare(WorkItem item) {
  if (const absl::Status st = PrepareOnPool(item); st.ok()) {
    next_->Enqueue(std::move(item)).IgnoreError();  // a refusal has finished the job
  } else {
    item.job->Refuse(st);
  }
  Prepared();
}

void PreparingScheduler::Prepared(int jobs) {
  absl::MutexLock lock(&mu_);
  preparing_ -= jobs;
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
