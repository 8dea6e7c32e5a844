#include "server/tasks/model_instance.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/tasks/guarded.h"

namespace gatescope {

ModelInstance::ModelInstance(std::unique_ptr<ModelRunner> runner, const BatchAssembly* assembly,
                             const Clock* clock, ExecutionObserver* observer,
                             PreparationPool* replies)
    : runner_(std::move(runner)),
      assembly_(assembly),
      clock_(clock),
      observer_(observer),
      replies_(replies) {}

void ModelInstance::Prepared::Finish(absl::StatusOr<NamedTensors> outputs) {
  if (finished) return;
  finished = true;
  job->Finish(std::move(outputs));
}

void ModelInstance::Prepare(std::vector<std::unique_ptr<Job>> group,
                            std::vector<Prepared>& ready) {
  for (auto& job : group) {
    std::unique_ptr<InferenceJob> inference(dynamic_cast<InferenceJob*>(job.get()));
    if (inference == nullptr) {
      job->Refuse(absl::InternalError("a model instance runs only inference jobs"));
      continue;
    }
    job.release();
    ready.push_back({std::move(inference), at::Tensor()});
    Prepared& p = ready.back();
    absl::StatusOr<at::Tensor> example = Guarded("preparing the input", [&] {
      return p.job->Prepare();
    });
    if (example.ok()) {
      p.example = *std::move(example);
    } else {
      p.Finish(example.status());
    }
  }
}

void ModelInstance::Execute(std::vector<std::unique_ptr<Job>> group) {
  const absl::Time input_start = clock_->Now();
  std::vector<Prepared> ready;
  ready.reserve(group.size());  // Prepared entries stay in place while jobs run
  try {
    Prepare(std::move(group), ready);
    Run(ready, input_start);
  } catch (const std::exception& e) {
    for (Prepared& p : ready) {
      p.Finish(absl::InternalError(absl::StrCat("model instance failed: ", e.what())));
    }
  }
}

void ModelInstance::Run(std::vector<Prepared>& ready, absl::Time input_start) {
  std::vector<Prepared*> predictions, explanations;
  for (Prepared& p : ready) {
    if (!p.finished) (p.job->explains() ? explanations : predictions).push_back(&p);
  }
  // Preparation time is shared out over the prepared jobs.
  const size_t prepared = ready.size();
  const absl::Duration per_job =
      prepared == 0 ? absl::ZeroDuration() : (clock_->Now() - input_start) / prepared;
  RunPredictions(predictions, per_job);
  for (Prepared* one : explanations) RunExplanation(*one, per_job);
}

void ModelInstance::RunPredictions(const std::vector<Prepared*>& jobs,
                                   absl::Duration input_time) {
  if (jobs.empty()) return;
  std::vector<at::Tensor> examples;
  for (const Prepared* p : jobs) examples.push_back(p->example);
  auto batches = Guarded("gathering the batch",
                         [&] { return assembly_->Gather(examples, CallShapesFor(*runner_)); });
  if (batches.ok()) batches = CheckCoverage(*std::move(batches), jobs.size());
  if (!batches.ok()) {
    for (Prepared* p : jobs) p->Finish(batches.status());
    return;
  }
  for (GatheredBatch& batch : *batches) RunBatch(jobs, batch, input_time);
}

absl::StatusOr<std::vector<GatheredBatch>> ModelInstance::CheckCoverage(
    std::vector<GatheredBatch> batches, size_t examples) {
  std::vector<int> seen(examples, 0);
  for (const GatheredBatch& batch : batches) {
    for (size_t member : batch.members) {
      if (member >= examples || seen[member]++ > 0) {
        return absl::InternalError("the task's gather repeated or invented an example");
      }
    }
  }
  for (int count : seen) {
    if (count == 0) return absl::InternalError("the task's gather lost an example");
  }
  return batches;
}

void ModelInstance::RunBatch(const std::vector<Prepared*>& jobs, GatheredBatch& batch,
                             absl::Duration input_time) {
  const absl::Time infer_start = clock_->Now();
  absl::StatusOr<NamedTensors> outputs = Guarded("model", [&] {
    return runner_->Predict(batch.inputs);
  });
  if (outputs.status().code() == absl::StatusCode::kInvalidArgument &&
      batch.members.size() > 1) {
    // The model refused an input: find which, so only its request fails.
    RunOneByOne(jobs, batch, input_time);
    return;
  }
  const absl::Time output_start = clock_->Now();
  if (observer_ && outputs.ok()) {
    Guarded("observing the outputs", [&] {
      observer_->Outputs(*outputs);
      return absl::OkStatus();
    }).IgnoreError();  // statistics only: the requests still get their answers
  }
  std::vector<absl::StatusOr<NamedTensors>> slices;
  for (size_t i = 0; i < batch.members.size(); ++i) {
    if (!outputs.ok()) {
      slices.push_back(outputs.status());
      continue;
    }
    const at::Tensor& example = jobs[batch.members[i]]->example;
    slices.push_back(Guarded("scattering the outputs", [&] {
      return assembly_->Scatter(*outputs, static_cast<int64_t>(i), example);
    }));
  }
  // Reported before any reply goes out, so a client that has its answer also sees it
  // counted in the statistics.
  if (observer_ && outputs.ok()) {
    const int size = static_cast<int>(batch.members.size());
    observer_->Executed(size, input_time * size, output_start - infer_start,
                        clock_->Now() - output_start);
  }
  for (size_t i = 0; i < batch.members.size(); ++i) {
    Reply(*jobs[batch.members[i]], std::move(slices[i]));
  }
}

void ModelInstance::Reply(Prepared& p, absl::StatusOr<NamedTensors> outputs) {
  if (replies_ == nullptr || p.finished) {
    p.Finish(std::move(outputs));
    return;
  }
  // Shared with the task, so that a refused hand-off (the task dropped unrun) still has
  // the job and its outputs to finish here.
  struct Pending {
    std::unique_ptr<InferenceJob> job;
    absl::StatusOr<NamedTensors> outputs;
  };
  auto pending = std::make_shared<Pending>();  // may throw: `p` still holds the job
  pending->job = std::move(p.job);
  pending->outputs = std::move(outputs);
  p.finished = true;  // by the task from here on, or just below
  absl::Status st;
  try {
    st = replies_->Submit([pending] { pending->job->Finish(std::move(pending->outputs)); });
  } catch (const std::exception& e) {  // the task was not queued
    st = absl::InternalError(e.what());
  }
  if (!st.ok()) pending->job->Finish(std::move(pending->outputs));
}

void ModelInstance::RunOneByOne(const std::vector<Prepared*>& jobs, const GatheredBatch& batch,
                                absl::Duration input_time) {
  for (size_t member : batch.members) {
    auto single = Guarded("gathering the batch", [&] {
      return assembly_->Gather({jobs[member]->example}, CallShapesFor(*runner_));
    });
    if (single.ok()) single = CheckCoverage(*std::move(single), 1);
    if (!single.ok() || single->size() != 1) {
      jobs[member]->Finish(single.ok() ? absl::InternalError("gather split one example")
                                       : single.status());
      continue;
    }
    GatheredBatch one = std::move(single->front());
    one.members = {member};
    RunBatch(jobs, one, input_time);
  }
}

void ModelInstance::RunExplanation(Prepared& one, absl::Duration input_time) {
  absl::StatusOr<ExplainPass> pass = Guarded("starting the explanation", [&] {
    return one.job->BeginExplain();
  });
  if (!pass.ok()) {
    one.Finish(pass.status());
    return;
  }
  const absl::Time infer_start = clock_->Now();
  absl::StatusOr<NamedTensors> outputs = Guarded("explain", [&]() -> absl::StatusOr<NamedTensors> {
    // As it is, not padded: an explanation runs eagerly, and a model may refuse padding
    // in it (the text models explain one unpadded text).
    auto batches = assembly_->Gather({one.example}, CallShapes{});
    if (batches.ok()) batches = CheckCoverage(*std::move(batches), 1);
    if (!batches.ok()) return batches.status();
    auto visit = [&pass](int layer, const NamedTensors& maps) {
      NamedTensors mine;
      for (const auto& [name, t] : maps) mine.emplace(name, t[0]);
      return pass->visit(layer, mine);
    };
    auto all = runner_->Explain(batches->front().inputs, pass->layers, pass->args, visit);
    if (!all.ok()) return all.status();
    return assembly_->Scatter(*all, 0, one.example);
  });
  if (observer_ && outputs.ok()) {
    observer_->Executed(1, input_time, clock_->Now() - infer_start, absl::ZeroDuration());
  }
  one.Finish(std::move(outputs));
}

}  // namespace gatescope
