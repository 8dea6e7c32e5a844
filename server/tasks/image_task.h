// What the image tasks share: the image input (metadata defaults and checks, decoding from
// either API), gathering examples of equal shape into stacked batches, slicing outputs
// back, the KServe input signature, and the per-example KServe jobs.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tasks/image_job.h"
#include "server/tasks/task.h"

namespace gatescope {

class ImageTask : public Task {
 public:
  const ModelConfig& config() const override { return config_; }

  // Examples of equal shape are stacked into one call each, in order of first appearance.
  absl::StatusOr<std::vector<GatheredBatch>> Gather(
      const std::vector<at::Tensor>& examples) const override;
  // Every output's row `position`.
  absl::StatusOr<NamedTensors> Scatter(const NamedTensors& outputs, int64_t position,
                                       const at::Tensor& example) const override;

 protected:
  // `config` must have passed NormaliseImageInput.
  ImageTask(ModelConfig config, TaskOptions options)
      : config_(std::move(config)), options_(options) {}

  const TaskOptions& options() const { return options_; }
  // The model's own input size [H, W].
  ImageSize model_size() const;

  // KServe "input": FP32 [C, H, W] (H and W -1 for models of any size), NCHW.
  DeclaredTensor InputTensor() const;
  // A forward() output FP32 with its per-example shape.
  static DeclaredTensor Float32(const std::string& name, std::vector<int64_t> shape);

  // Adds the task's own outputs to one example's forward() outputs (in place), given the
  // input's size.
  using Extend = std::function<absl::Status(NamedTensors& outputs, ImageSize size)>;
  // The examples of a KServe request, after refusing parameters that belong to other tasks
  // and outputs the request may not ask for (`known`). Calls results->Expect.
  absl::StatusOr<std::vector<ImageMaker>> KServeExamples(
      const ::inference::ModelInferRequest& request, const std::shared_ptr<InferResults>& results,
      const std::function<bool(std::string_view output)>& known) const;
  // Example `i`'s job: its forward() outputs, extended, go to slot i of `results`.
  static std::unique_ptr<InferenceJob> KServeJob(
      ImageMaker make, size_t i, const std::shared_ptr<InferResults>& results, Extend extend,
      std::optional<ImageJob::Explanation> explanation = std::nullopt);

 private:
  const ModelConfig config_;
  const TaskOptions options_;
};

}  // namespace gatescope
