// The scheduling seam between frontends and a model's runner.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

// One request's work. Both callbacks run on the scheduler's worker thread and must not
// block; whatever they capture must outlive the call of `done`.
struct WorkItem {
  // Builds this request's input example (no batch dim), e.g. by decoding an image.
  std::function<absl::StatusOr<at::Tensor>()> make_input;
  // Called exactly once with this request's slice of every output (batch dim removed) or
  // with the error (INVALID_ARGUMENT from make_input, DEADLINE_EXCEEDED, INTERNAL, ...).
  std::function<void(absl::StatusOr<NamedTensors>)> done;
  // Items still queued at this time are finished with DEADLINE_EXCEEDED, not run.
  absl::Time deadline = absl::InfiniteFuture();
  // If set and true when the worker takes the item, it is finished with CANCELLED, not
  // run (e.g. the client went away). Called on the worker thread; must be thread-safe.
  std::function<bool()> cancelled;
  // Items batch together only when their keys are equal (e.g. a hash of the input shape
  // when it is known before decoding); inputs of different shapes are never stacked.
  uint64_t shape_key = 0;
  // Priority level, 1 = highest; 0: the model's default level.
  int priority = 0;
  // The request's own queue timeout (honoured if the model allows overrides); zero: none.
  absl::Duration timeout = absl::ZeroDuration();
  // Set for explain requests: the model's layer-by-layer explanation pass runs instead of
  // forward() over `explain_layers` layers, calling this (on the worker thread) with each
  // layer's maps of this request, batch dim removed. Such items always run alone.
  LayerMapsVisitor explain_layer;
  int explain_layers = 0;
  // Optional, for explain requests: called on the worker thread after make_input succeeded
  // (so it may use what make_input learnt, e.g. the input's size) and before the pass; its
  // values are the extra arguments of the pass's start (ModelRunner::Explain `args`). An
  // error finishes the item with it, unrun. Unset: no extra arguments.
  std::function<absl::StatusOr<std::vector<double>>()> explain_args;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Queues `item` without blocking. On error (RESOURCE_EXHAUSTED: queue full;
  // UNAVAILABLE: stopping) `done` is not called and the caller still owns the request.
  // Thread-safe.
  virtual absl::Status Enqueue(WorkItem item) = 0;
  // Refuses new items, finishes every queued one, then joins the worker. Idempotent;
  // blocks until drained.
  virtual void Stop() = 0;
};

}  // namespace gatescope
