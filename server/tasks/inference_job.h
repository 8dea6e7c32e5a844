// A request as a model instance executes it. Tasks create the concrete jobs; the model
// instance (ModelInstance) calls them in this order: Prepare, then (for explanations)
// BeginExplain, then Finish exactly once. All on its worker thread, except that Finish of a
// prediction may run on a reply thread instead (ModelInstance's `replies`), after a hand-off
// that publishes what the worker wrote.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/batching/job.h"
#include "server/runtime/named_tensors.h"

namespace gatescope {

// An explanation pass: run instead of forward(), one layer at a time.
struct ExplainPass {
  int layers = 0;
  std::vector<double> args;  // extra arguments of the pass's start (ModelRunner::Explain)
  LayerMapsVisitor visit;    // each layer's maps of this example, batch dim removed
};

class InferenceJob : public Job {
 public:
  // Whether this job is an explanation pass; such jobs are scheduled run_alone.
  virtual bool explains() const = 0;

  // Jobs with equal keys may share a model call (e.g. images of one size for a model that
  // takes any size); 0 when every job of the model may (or when it cannot be known before
  // the input is decoded). Cheap; called on the gRPC thread.
  virtual uint64_t shape_key() const { return 0; }

  // This request's example without the batch dimension (e.g. a decoded image [C, H, W]).
  // CPU-bound; may throw (the instance turns that into INTERNAL). On error the instance
  // finishes the job with it, unrun.
  virtual absl::StatusOr<at::Tensor> Prepare() = 0;

  // After Prepare, for explanation jobs: the pass to run (it may use what Prepare learnt,
  // e.g. the input's size). On error the instance finishes the job with it, unrun.
  virtual absl::StatusOr<ExplainPass> BeginExplain() {
    return absl::InternalError("not an explanation job");
  }

  // This example's outputs (batch dim removed) or the error: writes the result and
  // finishes the request. Called exactly once; must not throw.
  virtual void Finish(absl::StatusOr<NamedTensors> outputs) = 0;

  void Refuse(absl::Status status) final { Finish(std::move(status)); }
};

}  // namespace gatescope
