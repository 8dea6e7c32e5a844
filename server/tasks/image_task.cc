#include "server/tasks/image_task.h"

#include <ATen/ATen.h>

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/tasks/task_registry.h"

namespace gatescope {

absl::StatusOr<std::vector<GatheredBatch>> ImageTask::Gather(
    const std::vector<at::Tensor>& examples) const {
  std::vector<GatheredBatch> batches;
  std::map<std::vector<int64_t>, size_t> by_shape;  // shape -> index into batches
  for (size_t i = 0; i < examples.size(); ++i) {
    auto [it, added] = by_shape.emplace(examples[i].sizes().vec(), batches.size());
    if (added) batches.emplace_back();
    batches[it->second].members.push_back(i);
  }
  for (GatheredBatch& batch : batches) {
    std::vector<at::Tensor> rows;
    for (size_t i : batch.members) rows.push_back(examples[i]);
    batch.inputs = {at::stack(rows)};
  }
  return batches;
}

absl::StatusOr<NamedTensors> ImageTask::Scatter(const NamedTensors& outputs, int64_t position,
                                                const at::Tensor&) const {
  NamedTensors one;
  for (const auto& [name, tensor] : outputs) one.emplace(name, tensor[position]);
  return one;
}

ImageSize ImageTask::model_size() const {
  return {config_.input().shape(1), config_.input().shape(2)};
}

DeclaredTensor ImageTask::InputTensor() const {
  std::vector<int64_t> shape(config_.input().shape().begin(), config_.input().shape().end());
  if (config_.input().any_size()) shape[1] = shape[2] = -1;
  return {"input", "FP32", ::inference::TYPE_FP32, std::move(shape)};
}

DeclaredTensor ImageTask::Float32(const std::string& name, std::vector<int64_t> shape) {
  return {name, "FP32", ::inference::TYPE_FP32, std::move(shape)};
}

absl::StatusOr<std::vector<ImageMaker>> ImageTask::KServeExamples(
    const ::inference::ModelInferRequest& request, const std::shared_ptr<InferResults>& results,
    const std::function<bool(std::string_view output)>& known) const {
  if (absl::Status st = RefuseOtherTasksParameters(request, config_.task()); !st.ok()) return st;
  for (const auto& o : request.outputs()) {
    if (!known(o.name())) {
      return absl::InvalidArgumentError(absl::StrCat("model has no output '", o.name(), "'"));
    }
  }
  auto input = ReadSingleInput(request);
  if (!input.ok()) return input.status();
  auto makers = KServeImageInputs(*input, config_.input());
  if (!makers.ok()) return makers.status();
  if (makers->empty()) return InvalidInfer("empty batch");
  results->Expect(makers->size());
  return makers;
}

std::unique_ptr<InferenceJob> ImageTask::KServeJob(
    ImageMaker make, size_t i, const std::shared_ptr<InferResults>& results, Extend extend,
    std::optional<ImageJob::Explanation> explanation) {
  auto write = [results, i, extend = std::move(extend)](const NamedTensors& outputs,
                                                        ImageSize size) {
    NamedTensors all = outputs;
    if (extend) {
      if (absl::Status st = extend(all, size); !st.ok()) return st;
    }
    results->Store(i, std::move(all));
    return absl::OkStatus();
  };
  auto done = [results, i](absl::Status status) { results->Complete(i, std::move(status)); };
  return std::make_unique<ImageJob>(std::move(make), std::move(write), std::move(done),
                                    std::move(explanation));
}

}  // namespace gatescope
