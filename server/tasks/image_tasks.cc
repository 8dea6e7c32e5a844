#include "server/tasks/image_tasks.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/tasks/task_registry.h"

namespace gatescope {
namespace {

// Example `i`'s job: its forward() outputs, extended, go to slot i of `results`.
std::unique_ptr<InferenceJob> KServeJob(ImageInput input, size_t i,
                                        const std::shared_ptr<InferResults>& results,
                                        ImageTask::ExampleWork work) {
  auto write = [results, i, extend = std::move(work.extend)](const NamedTensors& outputs,
                                                             ImageSize size) {
    NamedTensors all = outputs;
    if (extend) {
      if (absl::Status st = extend(all, size); !st.ok()) return st;
    }
    results->Store(i, std::move(all));
    return absl::OkStatus();
  };
  auto done = [results, i](absl::Status status) { results->Complete(i, std::move(status)); };
  return std::make_unique<ImageJob>(std::move(input), std::move(write), std::move(done),
                                    std::move(work.explanation));
}

}  // namespace

absl::StatusOr<ModelConfig> ImageTask::WithImageInput(const ModelConfig& config) {
  ModelConfig normalised = config;
  if (absl::Status st = NormaliseImageInput(*normalised.mutable_input()); !st.ok()) return st;
  return normalised;
}

ImageSize ImageTask::model_size() const {
  return {config_.input().shape(1), config_.input().shape(2)};
}

DeclaredTensor ImageTask::Float32(const std::string& name, std::vector<int64_t> shape) {
  return {name, "FP32", ::inference::TYPE_FP32, std::move(shape)};
}

template <typename Request>
absl::StatusOr<std::unique_ptr<InferenceJob>> ImageTask::V1Job(const Request& request,
                                                               absl::StatusOr<JobPlan> plan,
                                                               CallDone done) const {
  if (absl::Status st = RefuseOtherTasksFields(request, config_.task()); !st.ok()) return st;
  auto make = V1ImageInput(request, config_.input());
  if (!make.ok()) return make.status();
  if (!plan.ok()) return plan.status();
  if (plan->explanation) {
    absl::Status st = plan->explanation->collector->CheckBudget(model_size());
    if (!st.ok()) return st;
  }
  return std::unique_ptr<InferenceJob>(std::make_unique<ImageJob>(
      *std::move(make), std::move(plan->write), std::move(done), std::move(plan->explanation)));
}

absl::StatusOr<std::unique_ptr<InferenceJob>> ImageTask::Predict(
    const v1::PredictRequest& request, v1::PredictResponse* response, CallDone done) const {
  return V1Job(request, PlanPrediction(request, response), std::move(done));
}

absl::StatusOr<std::unique_ptr<InferenceJob>> ImageTask::Explain(
    const v1::ExplainRequest& request, v1::ExplainResponse* response, CallDone done) const {
  return V1Job(request, PlanExplanation(request, response), std::move(done));
}

absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> ImageTask::Infer(
    const ::inference::ModelInferRequest& request,
    const std::shared_ptr<InferResults>& results) const {
  if (absl::Status st = RefuseOtherTasksParameters(request, config_.task()); !st.ok()) return st;
  auto plan = PlanInfer(request);
  if (!plan.ok()) return plan.status();
  for (const auto& o : request.outputs()) {
    if (!plan->known(o.name())) {
      return absl::InvalidArgumentError(absl::StrCat("model has no output '", o.name(), "'"));
    }
  }
  auto input = ReadSingleInput(request);
  if (!input.ok()) return input.status();
  if (request.inputs(0).name() != kInputName) {
    return InvalidInfer(absl::StrCat("the model's input is named '", kInputName, "', not '",
                                     request.inputs(0).name(), "'"));
  }
  auto makers = KServeImageInputs(*input, config_.input());
  if (!makers.ok()) return makers.status();
  if (makers->empty()) return InvalidInfer("empty batch");
  // Every example's work before anything is queued; the call holds all its examples'
  // explanations until the last one finishes, so their bytes count together.
  std::vector<ExampleWork> work;
  int64_t explain_bytes = 0;
  for (size_t i = 0; i < makers->size(); ++i) {
    auto one = plan->per_example();
    if (!one.ok()) return one.status();
    if (one->explanation) explain_bytes += one->explanation->collector->PeakBytes(model_size());
    work.push_back(*std::move(one));
  }
  if (explain_bytes > options_.explain_max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the explanations of ", makers->size(), " examples would hold ", explain_bytes,
        " bytes, over the server's cap of ", options_.explain_max_bytes,
        " (--explain_max_bytes); send fewer examples or ask for less"));
  }
  results->Expect(makers->size());
  std::vector<std::unique_ptr<InferenceJob>> jobs;
  for (size_t i = 0; i < makers->size(); ++i) {
    jobs.push_back(KServeJob(std::move((*makers)[i]), i, results, std::move(work[i])));
  }
  return jobs;
}

KServeSignature ImageTask::Signature() const {
  KServeSignature s;
  std::vector<int64_t> shape(config_.input().shape().begin(), config_.input().shape().end());
  if (config_.input().any_size()) shape[1] = shape[2] = -1;
  s.input = {kInputName, "FP32", ::inference::TYPE_FP32, std::move(shape)};
  s.format = ::inference::ModelInput::FORMAT_NCHW;
  s.outputs = DeclaredOutputs();
  return s;
}

absl::StatusOr<std::vector<GatheredBatch>> ImageTask::Gather(
    const std::vector<at::Tensor>& examples, const CallShapes&) const {
  std::vector<GatheredBatch> batches;
  std::map<std::vector<int64_t>, size_t> by_shape;  // shape -> index into batches
  for (size_t i = 0; i < examples.size(); ++i) {
    auto [it, added] = by_shape.emplace(examples[i].sizes().vec(), batches.size());
    if (added) batches.emplace_back();
    batches[it->second].members.push_back(i);
  }
  for (GatheredBatch& batch : batches) {
    if (batch.members.size() == 1) {
      // A view, no copy (BatchAssembly::Gather allows it): a model that writes to its
      // input changes only its own example.
      batch.inputs = {examples[batch.members.front()].unsqueeze(0)};
      continue;
    }
    std::vector<at::Tensor> rows;
    for (size_t i : batch.members) rows.push_back(examples[i]);
    batch.inputs = {at::stack(rows)};
  }
  return batches;
}

absl::StatusOr<NamedTensors> ImageTask::Scatter(const NamedTensors& outputs, int64_t position,
                                                const at::Tensor&) const {
  return RowOf(outputs, position);
}

absl::StatusOr<at::Tensor> ImageTask::WarmUpExample() const {
  const ImageSize size = model_size();
  if (size.height < 1 || size.width < 1 || config_.input().shape(0) < 1) {
    return absl::UnimplementedError("the model declares no input size to warm up with");
  }
  return at::zeros({config_.input().shape(0), size.height, size.width}, at::kFloat);
}

}  // namespace gatescope
