// libFuzzer harness: any bytes as a KServe ModelInferRequest and as gatescope.v1 Predict and
// Explain requests (protobuf's parser first, as gRPC would), checked by a classifier's and a
// detector's task and every resulting job prepared and finished with outputs of the right
// shape: request -> tensor parsing of both APIs must end in a status, never a crash.
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/api/infer_results.h"
#include "server/config/model_config.h"
#include "server/tasks/task_registry.h"

namespace gatescope {
namespace {

constexpr char kClassifier[] = R"({"task":"image_classification","input":{"shape":[1,4,4]},
  "labels":["a","b","c"],"outputs":["logits"],"token_grid":[2,2],"cls_token":true,
  "maps":["attention"],"layers":1,"heads":1})";

constexpr char kDetector[] = R"({"task":"object_detection","input":{"shape":[1,8,8],
  "any_size":true,"native_size":true,"max_pixels":4096},"labels":["a","b"],
  "outputs":["logits","boxes"],"maps":["sampling_points"],"layers":2,"heads":1,
  "detection":{"encoder_layers":1,"decoder_layers":1,"levels":1,"points":1,"queries":2,
  "score_threshold":0.5,"max_detections":4}})";

std::unique_ptr<Task> Make(const char* json) {
  auto config = ParseModelConfig(json);
  if (!config.ok()) abort();
  TaskOptions options;
  options.explain_max_bytes = 1 << 20;
  auto task = CreateTask(*config, options);
  if (!task.ok()) abort();
  return *std::move(task);
}

// Plausible forward() outputs of either model for one example.
NamedTensors Outputs(const Task& task) {
  if (task.config().task() == "object_detection") {
    return {{"logits", at::zeros({2, 3})}, {"boxes", at::full({2, 4}, 0.5f)}};
  }
  return {{"logits", at::tensor({0.1f, 2.f, -1.f})}};
}

void Run(const Task& task, absl::StatusOr<std::unique_ptr<InferenceJob>> job) {
  if (!job.ok()) return;
  if ((*job)->prepares_ahead()) (void)(*job)->PrepareAhead();
  auto example = (*job)->Prepare();
  if (!example.ok()) {
    (*job)->Finish(example.status());
    return;
  }
  (*job)->Finish(Outputs(task));
}

}  // namespace
}  // namespace gatescope

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gatescope;
  static const std::unique_ptr<Task> tasks[] = {Make(kClassifier), Make(kDetector)};
  for (const auto& task : tasks) {
    ::inference::ModelInferRequest infer;
    if (infer.ParseFromArray(data, static_cast<int>(size))) {
      ::inference::ModelInferResponse response;
      auto results = std::make_shared<InferResults>(&infer, &response, [](absl::Status) {});
      auto jobs = task->Infer(infer, results);
      if (jobs.ok() && jobs->size() <= 16) {
        for (auto& job : *jobs) Run(*task, std::move(job));
      } else if (jobs.ok()) {
        for (auto& job : *jobs) job->Refuse(absl::InvalidArgumentError("batch too large"));
      }
    }
    ::gatescope::v1::PredictRequest predict;
    if (predict.ParseFromArray(data, static_cast<int>(size))) {
      ::gatescope::v1::PredictResponse response;
      Run(*task, task->Predict(predict, &response, [](absl::Status) {}));
    }
  }
  return 0;
}
