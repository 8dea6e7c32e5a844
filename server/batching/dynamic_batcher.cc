#include "server/batching/dynamic_batcher.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

// Runs f, turning an escaping exception into INTERNAL: nothing thrown on a worker thread
// may terminate the server or leave an item unfinished.
template <typename F>
auto Guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("unexpected exception: ", e.what()));
  }
}

void Finish(WorkItem& item, absl::StatusOr<NamedTensors> result) {
  try {
    item.done(std::move(result));
  } catch (const std::exception&) {
    // `done` owns the reply; an exception inside it cannot be reported anywhere else.
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(
    std::vector<ModelRunner*> instances, DynamicBatchingConfig config, const Clock* clock,
    SchedulerObserver* observer) {
  if (instances.empty() || clock == nullptr) {
    return absl::InvalidArgumentError("DynamicBatcher needs at least one instance and a clock");
  }
  for (ModelRunner* r : instances) {
    if (r == nullptr) return absl::InvalidArgumentError("null model instance");
  }
  if (absl::Status st = NormaliseBatchingConfig(config); !st.ok()) return st;
  std::unique_ptr<DynamicBatcher> batcher(
      new DynamicBatcher(std::move(config), clock, observer));
  absl::MutexLock lock(&batcher->join_mu_);
  for (ModelRunner* r : instances) {
    batcher->workers_.emplace_back([b = batcher.get(), r] { b->WorkerLoop(r); });
  }
  return batcher;
}

DynamicBatcher::DynamicBatcher(DynamicBatchingConfig config, const Clock* clock,
                               SchedulerObserver* observer)
    : clock_(clock), observer_(observer), queue_(std::move(config)) {}

DynamicBatcher::~DynamicBatcher() { Stop(); }

absl::Status DynamicBatcher::Enqueue(WorkItem item) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("model is shutting down");
  const absl::Time deadline = item.deadline;
  const uint64_t key = item.shape_key;
  const int priority = item.priority;
  const absl::Duration timeout = item.timeout;
  absl::Status st = queue_.Push(item, clock_->Now(), deadline, key, priority, timeout);
  if (st.ok()) {
    ++arrivals_;
    if (observer_) observer_->QueueDepth(static_cast<int>(queue_.size()));
  }
  return st;
}

void DynamicBatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
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

bool DynamicBatcher::NextWork(std::vector<Entry>& expired, std::vector<Entry>& batch) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    const absl::Time now = clock_->Now();
    expired = queue_.TakeExpired(now);
    if (!expired.empty()) {
      if (observer_) observer_->QueueDepth(static_cast<int>(queue_.size()));
      return true;
    }
    auto decision = queue_.Next(now, /*flush=*/stopping_);
    if (!decision.batch.empty()) {
      batch = std::move(decision.batch);
      if (observer_) {
        observer_->QueueDepth(static_cast<int>(queue_.size()));
        for (const Entry& e : batch) observer_->Dequeued(now - e.enqueued);
      }
      return true;
    }
    if (stopping_ && queue_.size() == 0) return false;
    const uint64_t seen = arrivals_;
    auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return arrivals_ != seen || stopping_;
    };
    if (decision.wake_at.has_value()) {
      // wake_at is in the injected clock's time; wait the equivalent real interval.
      mu_.AwaitWithTimeout(absl::Condition(&changed),
                           std::max(*decision.wake_at - now, absl::ZeroDuration()));
    } else {
      mu_.Await(absl::Condition(&changed));
    }
  }
}

void DynamicBatcher::WorkerLoop(ModelRunner* runner) {
  std::vector<Entry> expired, batch;
  while (NextWork(expired, batch)) {
    for (Entry& e : expired) {
      Finish(e.payload, absl::DeadlineExceededError("deadline or queue timeout passed"));
    }
    expired.clear();
    if (!batch.empty()) RunBatch(runner, batch);
    batch.clear();
  }
}

void DynamicBatcher::RunBatch(ModelRunner* runner, std::vector<Entry>& batch) {
  const absl::Time input_start = absl::Now();
  // Predictions grouped by exact input shape: only equal shapes are stacked into one
  // runner call. Explanations run one by one.
  std::map<std::vector<int64_t>, Group> groups;
  std::vector<Group> explanations;
  for (Entry& e : batch) {
    WorkItem& item = e.payload;
    if (item.cancelled && item.cancelled()) {
      Finish(item, absl::CancelledError("request cancelled while queued"));
      continue;
    }
    absl::StatusOr<at::Tensor> input = Guarded([&] { return item.make_input(); });
    if (!input.ok()) {
      Finish(item, input.status());
      continue;
    }
    if (item.explain_layer) {
      explanations.emplace_back().emplace_back(&item, *std::move(input));
    } else {
      groups[input->sizes().vec()].emplace_back(&item, *std::move(input));
    }
  }
  // Preparation time is shared out over the runner calls by their size.
  const absl::Duration input_time = absl::Now() - input_start;
  size_t prepared = explanations.size();
  for (const auto& [shape, members] : groups) prepared += members.size();
  for (auto& [shape, members] : groups) RunGroup(runner, members, input_time, prepared);
  for (Group& one : explanations) RunGroup(runner, one, input_time, prepared);
}

void DynamicBatcher::RunGroup(ModelRunner* runner, Group& members, absl::Duration input_time,
                              size_t prepared) {
  WorkItem* explain = members.front().first->explain_layer ? members.front().first : nullptr;
  const absl::Time infer_start = absl::Now();
  absl::StatusOr<NamedTensors> outputs = Guarded([&]() -> absl::StatusOr<NamedTensors> {
    std::vector<at::Tensor> inputs;
    inputs.reserve(members.size());
    for (auto& m : members) inputs.push_back(m.second);
    const at::Tensor stacked = at::stack(inputs);
    if (explain == nullptr) return runner->Predict(stacked);
    std::vector<double> args;
    if (explain->explain_args) {
      absl::StatusOr<std::vector<double>> got = explain->explain_args();
      if (!got.ok()) return got.status();
      args = *std::move(got);
    }
    return runner->Explain(stacked, explain->explain_layers, args,
                           [explain](int layer, const NamedTensors& maps) {
                             NamedTensors one;
                             for (const auto& [name, t] : maps) one.emplace(name, t[0]);
                             return explain->explain_layer(layer, one);
                           });
  });
  const absl::Time output_start = absl::Now();
  if (observer_ && outputs.ok() && explain == nullptr) observer_->Outputs(*outputs);
  std::vector<absl::StatusOr<NamedTensors>> slices;
  slices.reserve(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    if (!outputs.ok()) {
      slices.push_back(outputs.status());
      continue;
    }
    slices.push_back(Guarded([&]() -> absl::StatusOr<NamedTensors> {
      NamedTensors one;
      for (const auto& [name, tensor] : *outputs) one.emplace(name, tensor[i]);
      return one;
    }));
  }
  // Reported (for successful executions) before any reply goes out, so a client that has
  // its answer also sees it counted in the statistics.
  if (observer_ && outputs.ok()) {
    observer_->Executed(static_cast<int>(members.size()),
                        input_time * static_cast<double>(members.size()) /
                            static_cast<double>(prepared),
                        output_start - infer_start, absl::Now() - output_start);
  }
  for (size_t i = 0; i < members.size(); ++i) Finish(*members[i].first, std::move(slices[i]));
}

}  // namespace gatescope
