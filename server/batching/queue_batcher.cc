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

void QueueBatcher::RunBatch(std::deque<WorkItem>& items) {
  std::vector<WorkItem*> ready;
  std::vector<at::Tensor> inputs;
  const absl::Time now = clock_->Now();
  for (WorkItem& item : items) {
    if (now >= item.deadline) {
      item.done(absl::DeadlineExceededError("deadline passed while queued"));
      continue;
    }
    absl::StatusOr<at::Tensor> input = item.make_input();
    if (!input.ok()) {
      item.done(input.status());
      continue;
    }
    if (!inputs.empty() && input->sizes() != inputs.front().sizes()) {
      item.done(absl::InvalidArgumentError("input shape differs from the batch's"));
      continue;
    }
    inputs.push_back(*std::move(input));
    ready.push_back(&item);
  }
  if (ready.empty()) return;
  absl::StatusOr<NamedTensors> outputs = runner_->Predict(at::stack(inputs));
  for (size_t i = 0; i < ready.size(); ++i) {
    if (!outputs.ok()) {
      ready[i]->done(outputs.status());
      continue;
    }
    NamedTensors slice;
    for (const auto& [name, tensor] : *outputs) slice.emplace(name, tensor[i]);
    ready[i]->done(std::move(slice));
  }
}

}  // namespace gatescope
