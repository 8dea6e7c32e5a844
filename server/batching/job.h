// What the batcher moves around: opaque jobs with the attributes that decide when and
// with whom they run, and the model instances that execute them. Nothing here knows
// tensors or protocols (Triton's split: the scheduler only forms groups of requests; the
// backend instance gathers their inputs, runs and scatters the outputs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace gatescope {

// One request's work. The batcher never looks inside; the model instance that executes
// it knows its concrete type.
class Job {
 public:
  virtual ~Job() = default;
  // Finishes the request without running it (DEADLINE_EXCEEDED, CANCELLED, UNAVAILABLE,
  // RESOURCE_EXHAUSTED, ...): by the scheduler for a job it will not hand to an executor,
  // or by an executor for a job it cannot run. Called at most once, instead of running
  // the job; may run on any thread and must not block.
  virtual void Refuse(absl::Status status) = 0;

  // Whether the job has CPU-heavy input work (decoding an encoded image) that should run
  // before it is queued, on a preparation thread (PreparingScheduler), rather than on the
  // model's instance worker where it would hold up every request of the model. Cheap.
  virtual bool prepares_ahead() const { return false; }
  // With prepares_ahead: the work is short enough (a small image) to run on the thread that
  // enqueues the job (a gRPC thread) rather than wait for a preparation thread; a thread
  // hop costs more than such work (docs/performance.md). Cheap.
  virtual bool prepares_on_caller() const { return false; }
  // That work; called at most once, on a preparation thread (or the enqueuing thread, see
  // prepares_on_caller), before the job is queued
  // (the queue's hand-off publishes its results to the worker). On error the job is
  // refused with it, unqueued. Must not throw.
  virtual absl::Status PrepareAhead() { return absl::OkStatus(); }
};

// A job and how it is scheduled.
struct WorkItem {
  std::unique_ptr<Job> job;
  // Jobs still queued at this time are refused with DEADLINE_EXCEEDED.
  absl::Time deadline = absl::InfiniteFuture();
  // If set and true when a worker takes the job, it is refused with CANCELLED (e.g. the
  // client went away). Called on a worker thread; must be thread-safe.
  std::function<bool()> cancelled;
  // Jobs share a group only when their keys are equal.
  uint64_t shape_key = 0;
  // Priority level, 1 = highest; 0: the model's default level.
  int priority = 0;
  // The request's own queue timeout (honoured if the model allows overrides); zero: none.
  absl::Duration timeout = absl::ZeroDuration();
  // Executed in a group of its own (e.g. a layer-by-layer explanation pass).
  bool run_alone = false;
};

// One model instance as the batcher drives it: a single worker thread calls Execute.
class Executor {
 public:
  virtual ~Executor() = default;
  // Runs `group` (1..max_batch_size jobs of equal shape key, or one run_alone job) and
  // finishes every job in it; the executor owns them now. Blocks for the whole
  // computation (an executor may hand replies to other threads to finish afterwards).
  // Must not throw.
  virtual void Execute(std::vector<std::unique_ptr<Job>> group) = 0;
};

}  // namespace gatescope
