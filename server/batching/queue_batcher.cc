#include "server/batching/queue_batcher.h"

#include <ATen/ATen.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace gatescope {

absl::StatusOr<std::unique_ptr<QueueBatcher>> QueueBatcher::Create(ModelRunner* runner,
                                                                    QueueBatcherOptions options,
                                                                    const Clock* clock) {
  if (runner == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("QueueBatcher needs a runner and a clock");
  }
  if (options.max_batch_size < 1 || options.max_queue_size < 1) {
    return absl::InvalidArgumentError("max_batch_size and max_queue_size must be >= 1");
  }
  std::unique_ptr<QueueBatcher> batcher(new QueueBatcher(runner, options, clock));
  batcher->worker_ = std::thread([b = batcher.get()] { b->WorkerLoop(); });
  return batcher;
}

QueueBatcher::QueueBatcher(ModelRunner* runner, QueueBatcherOptions options, const Clock* clock)
    : runner_(runner), options_(options), clock_(clock) {}

QueueBatcher::~QueueBatcher() { Stop(); }

absl::Status QueueBatcher::Enqueue(WorkItem item) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("model is shutting down");
  if (static_cast<int>(queue_.size()) >= options_.max_queue_size) {
    return absl::ResourceExhaustedError(
        absl::StrCat("model queue is full (", options_.max_queue_size, " waiting)"));
  }
  queue_.push_back(std::move(item));
  return absl::OkStatus();
}

void QueueBatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (worker_.joinable()) worker_.join();
}

int QueueBatcher::QueueDepth() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

void QueueBatcher::WorkerLoop() {
  for (;;) {
    std::deque<WorkItem> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](QueueBatcher* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
            return b->stopping_ || !b->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping and drained
      while (!queue_.empty() && static_cast<int>(batch.size()) < options_.max_batch_size) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    RunBatch(batch);
  }
}

namespace {

// Runs f, turning an escaping exception into INTERNAL: nothing thrown on the worker thread
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

void QueueBatcher::RunBatch(std::deque<WorkItem>& items) {
  std::vector<WorkItem*> ready;
  std::vector<at::Tensor> inputs;
  const absl::Time now = clock_->Now();
  for (WorkItem& item : items) {
    if (now >= item.deadline) {
      Finish(item, absl::DeadlineExceededError("deadline passed while queued"));
      continue;
    }
    if (item.cancelled && item.cancelled()) {
      Finish(item, absl::CancelledError("request cancelled while queued"));
      continue;
    }
    absl::StatusOr<at::Tensor> input = Guarded([&] { return item.make_input(); });
    if (!input.ok()) {
      Finish(item, input.status());
      continue;
    }
    if (!inputs.empty() && input->sizes() != inputs.front().sizes()) {
      Finish(item, absl::InvalidArgumentError("input shape differs from the batch's"));
      continue;
    }
    inputs.push_back(*std::move(input));
    ready.push_back(&item);
  }
  if (ready.empty()) return;
  absl::StatusOr<NamedTensors> outputs =
      Guarded([&]() -> absl::StatusOr<NamedTensors> { return runner_->Predict(at::stack(inputs)); });
  for (size_t i = 0; i < ready.size(); ++i) {
    if (!outputs.ok()) {
      Finish(*ready[i], outputs.status());
      continue;
    }
    absl::StatusOr<NamedTensors> slice = Guarded([&]() -> absl::StatusOr<NamedTensors> {
      NamedTensors one;
      for (const auto& [name, tensor] : *outputs) one.emplace(name, tensor[i]);
      return one;
    });
    Finish(*ready[i], std::move(slice));
  }
}

}  // namespace gatescope
