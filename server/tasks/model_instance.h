// One model instance: its runner (on its device) and how its task gathers and scatters.
// The batcher hands it groups of jobs; it prepares each job's example on the worker
// thread, gathers them into model calls, runs them, and scatters the outputs back to
// every job (explanation jobs run alone, layer by layer).
#pragma once

#include <memory>
#include <vector>

#include "server/batching/job.h"
#include "server/common/clock.h"
#include "server/runtime/model_runner.h"
#include "server/tasks/batch_assembly.h"
#include "server/batching/preparation_pool.h"
#include "server/tasks/execution_observer.h"
#include "server/tasks/inference_job.h"

namespace gatescope {

// The shapes an instance on `runner` wants now: whole length buckets while it records
// CUDA graphs.
inline CallShapes CallShapesFor(const ModelRunner& runner) {
  CallShapes shapes;
  shapes.whole_length_buckets = runner.RecordsCudaGraphs();
  return shapes;
}

class ModelInstance final : public Executor {
 public:
  // Owns `runner`. `assembly` (the model's task), `clock` and `observer` (may be null) are
  // not owned and must outlive the instance. With `replies` (not owned; must outlive the
  // instance and run every task it accepted before it is destroyed) predictions are
  // finished there, not on the worker: their replies (postprocessing, serialisation, the
  // send) leave the forward's CPU when the pool's threads run elsewhere (--forward_cpus).
  // A refused hand-off (the pool full or stopping) finishes on the worker. Predictions
  // are gathered with the shapes the runner wants at the time (CallShapesFor: padded to
  // whole length buckets until a failed recording turns its graphs off), explanations as
  // they are.
  ModelInstance(std::unique_ptr<ModelRunner> runner, const BatchAssembly* assembly,
                const Clock* clock, ExecutionObserver* observer,
                PreparationPool* replies = nullptr);

  // Jobs must be InferenceJobs (others are refused with INTERNAL). A job whose Prepare
  // fails finishes alone. A model call that fails with INVALID_ARGUMENT (the model
  // rejected an input) is retried one example at a time, so only the offending requests
  // fail; any other failure fails every job of the call. Every job is finished exactly
  // once, whatever throws (a job left over then gets INTERNAL): before this returns, or
  // for predictions handed to `replies`, on its thread afterwards. Nothing thrown escapes.
  void Execute(std::vector<std::unique_ptr<Job>> group) override;

 private:
  // A prepared job; finishing goes through it so that it happens once.
  struct Prepared {
    std::unique_ptr<InferenceJob> job;
    at::Tensor example;
    bool finished = false;
    void Finish(absl::StatusOr<NamedTensors> outputs);
  };
  void Prepare(std::vector<std::unique_ptr<Job>> group, std::vector<Prepared>& ready);
  void Run(std::vector<Prepared>& ready, absl::Time input_start);
  void RunExplanation(Prepared& one, absl::Duration input_time);
  void RunPredictions(const std::vector<Prepared*>& jobs, absl::Duration input_time);
  void RunBatch(const std::vector<Prepared*>& jobs, GatheredBatch& batch,
                absl::Duration input_time);
  void RunOneByOne(const std::vector<Prepared*>& jobs, const GatheredBatch& batch,
                   absl::Duration input_time);
  // Finishes `p` with `outputs` on `replies_` when there is one and it accepts, else here.
  void Reply(Prepared& p, absl::StatusOr<NamedTensors> outputs);
  // `batches` when they carry each of `examples` exactly once; INTERNAL otherwise.
  static absl::StatusOr<std::vector<GatheredBatch>> CheckCoverage(
      std::vector<GatheredBatch> batches, size_t examples);

  const std::unique_ptr<ModelRunner> runner_;
  const BatchAssembly* const assembly_;
  const Clock* const clock_;
  ExecutionObserver* const observer_;
  PreparationPool* const replies_;
};

}  // namespace gatescope
