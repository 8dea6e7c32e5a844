#include "server/batching/dynamic_batcher.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/thread_scheduling.h"
#include "server/common/timer_slack.h"

namespace gatescope {
namespace {

// Refuses a job; a throwing Refuse cannot be reported anywhere else, and must not end the
// worker.
void RefuseQuietly(Job& job, const absl::Status& status) {
  try {
    job.Refuse(status);
  } catch (const std::exception& e) {
    GS_LOG(ERROR) << "refusing a job threw: " << e.what();
  }
}

const absl::Status& Expired() {
  static const auto* status =
      new absl::Status(absl::DeadlineExceededError("deadline or queue timeout passed"));
  return *status;
}

const absl::Status& CancelledWhileQueued() {
  static const auto* status =
      new absl::Status(absl::CancelledError("request cancelled while queued"));
  return *status;
}

template <typename Entries>
void RefuseAll(Entries& entries, const absl::Status& status) {
  for (auto& e : entries) RefuseQuietly(*e.payload.job, status);
}

bool Cancelled(const WorkItem& item) { return item.cancelled && item.cancelled(); }

// Process-wide, over every batcher: what a polling worker watches to step aside. A poller
// that is not running cannot see its own arrival, and one that has yielded is not woken
// (with preemption) as a sleeping thread is; so it sleeps as soon as another batcher's
// worker may want a CPU (measured: docs/performance.md, "Idle workers poll").
std::atomic<uint64_t> all_arrivals{0};  // accepted by any batcher
std::atomic<int> forwards_running{0};   // workers between taking a group and finishing it

// A spin-wait hint to the CPU (no system call, the thread keeps its CPU).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(
    std::vector<Executor*> instances, DynamicBatchingConfig config, const Clock* clock,
    QueueObserver* observer) {
  if (instances.empty() || clock == nullptr) {
    return absl::InvalidArgumentError("DynamicBatcher needs at least one instance and a clock");
  }
  for (Executor* e : instances) {
    if (e == nullptr) return absl::InvalidArgumentError("null model instance");
  }
  if (absl::Status st = NormaliseBatchingConfig(config); !st.ok()) return st;
  std::unique_ptr<DynamicBatcher> batcher(
      new DynamicBatcher(std::move(config), clock, observer));
  absl::MutexLock lock(&batcher->join_mu_);
  for (Executor* e : instances) {
    batcher->workers_.emplace_back([b = batcher.get(), e] { b->WorkerLoop(e); });
  }
  return batcher;
}

SchedulerFactory DynamicBatcher::Factory(const Clock* clock) {
  return [clock](std::vector<Executor*> instances, const DynamicBatchingConfig& config,
                 QueueObserver* observer) -> absl::StatusOr<std::unique_ptr<Scheduler>> {
    auto batcher = Create(std::move(instances), config, clock, observer);
    if (!batcher.ok()) return batcher.status();
    return std::unique_ptr<Scheduler>(*std::move(batcher));
  };
}

DynamicBatcher::DynamicBatcher(DynamicBatchingConfig config, const Clock* clock,
                               QueueObserver* observer)
    : clock_(clock), observer_(observer), idle_poll_(config.idle_poll),
      queue_(std::move(config), clock->Now()) {}

DynamicBatcher::~DynamicBatcher() { Stop(); }

void DynamicBatcher::ReportDepth() {
  if (observer_) observer_->QueueDepth(static_cast<int>(queue_.size()));
}

void DynamicBatcher::Queued(size_t n) {
  if (n > 0) {
    arrivals_ += n;
    signals_.fetch_add(1, std::memory_order_release);
    all_arrivals.fetch_add(1, std::memory_order_release);
  }
  ReportDepth();
}

absl::Status DynamicBatcher::PushLocked(WorkItem& item, absl::Time now, bool arrival,
                                        std::vector<Entry>& expired,
                                        std::vector<Entry>& cancelled) {
  auto push = [&] {
    return queue_.Push(item, now, item.deadline, item.shape_key, item.priority, item.timeout,
                       item.run_alone, arrival);
  };
  absl::Status st = push();
  if (st.code() == absl::StatusCode::kResourceExhausted) {
    // Requests nobody waits for any more give their slots up now, not when a busy worker
    // next looks at the queue.
    std::vector<Entry> now_expired = queue_.TakeExpired(now);
    std::vector<Entry> now_cancelled = queue_.TakeIf(Cancelled);
    const bool freed = !now_expired.empty() || !now_cancelled.empty();
    std::move(now_expired.begin(), now_expired.end(), std::back_inserter(expired));
    std::move(now_cancelled.begin(), now_cancelled.end(), std::back_inserter(cancelled));
    if (freed) st = push();
  }
  return st;
}

absl::Status DynamicBatcher::Enqueue(WorkItem item) {
  absl::Status st;
  std::vector<Entry> expired, cancelled;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      st = absl::UnavailableError("model is shutting down");
    } else {
      st = PushLocked(item, clock_->Now(), /*arrival=*/true, expired, cancelled);
      Queued(st.ok() ? 1 : 0);
    }
  }
  // Refused outside the lock: a job's Refuse may finish its call.
  RefuseAll(expired, Expired());
  RefuseAll(cancelled, CancelledWhileQueued());
  if (!st.ok()) RefuseQuietly(*item.job, st);
  return st;
}

absl::Status DynamicBatcher::EnqueueGroup(std::vector<WorkItem> items) {
  absl::Status st;
  size_t queued = 0;
  std::vector<Entry> expired, cancelled;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      st = absl::UnavailableError("model is shutting down");
    } else {
      const absl::Time now = clock_->Now();
      for (; queued < items.size(); ++queued) {
        st = PushLocked(items[queued], now, /*arrival=*/queued == 0, expired, cancelled);
        if (!st.ok()) break;
      }
      Queued(queued);
    }
  }
  RefuseAll(expired, Expired());
  RefuseAll(cancelled, CancelledWhileQueued());
  for (size_t i = queued; i < items.size(); ++i) RefuseQuietly(*items[i].job, st);
  return st;
}

void DynamicBatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    signals_.fetch_add(1, std::memory_order_release);
  }
  absl::MutexLock lock(&join_mu_);
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
}

int DynamicBatcher::QueueDepth() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

void DynamicBatcher::PollForSignal(uint64_t seen) const noexcept {
  // Real time, whatever clock_ is: the window bounds CPU spent, not a latency budget.
  const auto until = std::chrono::steady_clock::now() + absl::ToChronoMicroseconds(idle_poll_);
  const uint64_t elsewhere = all_arrivals.load(std::memory_order_acquire);
  // No yield: this thread keeps its CPU (and so sees an arrival at once) until the window
  // ends or another batcher's worker may need it, and then sleeps.
  while (signals_.load(std::memory_order_acquire) == seen &&
         all_arrivals.load(std::memory_order_acquire) == elsewhere &&
         forwards_running.load(std::memory_order_acquire) == 0 &&
         std::chrono::steady_clock::now() < until) {
    CpuRelax();
  }
}

bool DynamicBatcher::NextWork(std::vector<Entry>& expired, std::vector<Entry>& group) {
  const bool polls = idle_poll_ > absl::ZeroDuration();
  bool polled = false;  // one window per idle start, then the sleep
  absl::MutexLock lock(&mu_);
  for (;;) {
    const absl::Time now = clock_->Now();
    expired = queue_.TakeExpired(now);
    if (!expired.empty()) {
      ReportDepth();
      return true;
    }
    auto decision = queue_.Next(now, /*flush=*/stopping_);
    if (!decision.batch.empty()) {
      group = std::move(decision.batch);
      ReportDepth();
      if (observer_) {
        for (const Entry& e : group) observer_->Dequeued(now - e.enqueued);
      }
      return true;
    }
    if (stopping_ && queue_.size() == 0) return false;
    if (polls && !polled && queue_.size() == 0 && !stopping_) {
      polled = true;
      const uint64_t signals = signals_.load(std::memory_order_relaxed);
      mu_.Unlock();  // re-taken before the loop reads the queue again
      PollForSignal(signals);
      mu_.Lock();
      continue;
    }
    polled = false;
    const uint64_t seen = arrivals_;
    auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return arrivals_ != seen || stopping_;
    };
    clock_->AwaitWithDeadline(mu_, absl::Condition(&changed),
                              decision.wake_at.value_or(absl::InfiniteFuture()));
  }
}

void DynamicBatcher::WorkerLoop(Executor* instance) {
  UsePreciseTimers();  // its timed wait is the queue delay, a latency budget
  NameCurrentThread("gs-forward");
  // For the worker's whole life, not per forward: switching policy around each forward
  // made the kernel reschedule at every switch (5.5 context switches per request instead
  // of 0.45, and 20 % less unbatched throughput; docs/performance.md).
  const ForwardPassScheduling forwards;
  std::vector<Entry> expired, group;
  while (NextWork(expired, group)) {
    RefuseAll(expired, Expired());
    expired.clear();
    std::vector<std::unique_ptr<Job>> jobs;
    for (Entry& e : group) {
      WorkItem& item = e.payload;
      if (Cancelled(item)) {
        RefuseQuietly(*item.job, CancelledWhileQueued());
      } else {
        jobs.push_back(std::move(item.job));
      }
    }
    group.clear();
    if (jobs.empty()) continue;
    forwards_running.fetch_add(1, std::memory_order_acq_rel);
    try {
      instance->Execute(std::move(jobs));
    } catch (const std::exception& e) {
      // Execute owns the jobs; one that throws breaks its contract, and its jobs are lost.
      GS_LOG(ERROR) << "model instance threw: " << e.what();
    }
    forwards_running.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace gatescope
