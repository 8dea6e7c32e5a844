// What the image tasks share: the image input (metadata defaults and checks, decoding from
// either API), gathering examples of equal shape into stacked batches, slicing outputs
// back, the KServe input signature, and turning every request into ImageJobs. A concrete
// image task (classification_task.cc, ...) says only what differs: how a request's task
// fields become a writer of its results and, for explanations, a collector.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tasks/image_job.h"
#include "server/tasks/task.h"

namespace gatescope {

// The KServe name of every image model's one input.
inline constexpr char kInputName[] = "input";

class ImageTask : public Task {
 public:
  // A gatescope.v1 request's part that depends on the task: the writer of its results
  // and, for explanations, what the pass needs.
  struct JobPlan {
    ImageJob::Writer write;
    std::optional<ImageJob::Explanation> explanation;
  };
  // What one KServe example adds to its forward() outputs (in place, given the input's
  // size), and the explanation pass it runs instead of forward(), if any.
  struct ExampleWork {
    std::function<absl::Status(NamedTensors& outputs, ImageSize size)> extend;
    std::optional<ImageJob::Explanation> explanation;
  };
  struct InferWork {
    // Which outputs a request may ask for.
    std::function<bool(std::string_view name)> known;
    // Each example's work; called once per example before anything is queued (an error,
    // e.g. RESOURCE_EXHAUSTED, fails the whole request).
    std::function<absl::StatusOr<ExampleWork>()> per_example;
  };

  const ModelConfig& config() const override { return config_; }

  absl::StatusOr<std::unique_ptr<InferenceJob>> Predict(
      const ::gatescope::v1::PredictRequest& request,
      ::gatescope::v1::PredictResponse* response, CallDone done) const final;
  absl::StatusOr<std::unique_ptr<InferenceJob>> Explain(
      const ::gatescope::v1::ExplainRequest& request,
      ::gatescope::v1::ExplainResponse* response, CallDone done) const final;
  absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> Infer(
      const ::inference::ModelInferRequest& request,
      const std::shared_ptr<InferResults>& results) const final;
  // "input" FP32 [C, H, W] (H and W -1 for models of any size), NCHW; the outputs
  // DeclaredOutputs names.
  KServeSignature Signature() const final;

  // Examples of equal shape are stacked into one call each, in order of first appearance.
  // Images are not padded, whatever `shapes` asks.
  absl::StatusOr<std::vector<GatheredBatch>> Gather(const std::vector<at::Tensor>& examples,
                                                    const CallShapes& shapes) const override;
  // Every output's row `position`.
  absl::StatusOr<NamedTensors> Scatter(const NamedTensors& outputs, int64_t position,
                                       const at::Tensor& example) const override;
  // Zeros, FP32 [C, H, W] of the model's own size.
  absl::StatusOr<at::Tensor> WarmUpExample() const override;

  // `config` with its image input normalised (NormaliseImageInput), for a task's factory.
  static absl::StatusOr<ModelConfig> WithImageInput(const ModelConfig& config);

 protected:
  ImageTask(ModelConfig config, TaskOptions options)
      : config_(std::move(config)), options_(options) {}

  const TaskOptions& options() const { return options_; }
  // The model's own input size [H, W].
  ImageSize model_size() const;

  // The task's part of each request, on the gRPC thread (cheap): INVALID_ARGUMENT for
  // fields it does not take, RESOURCE_EXHAUSTED for explanations over the byte cap.
  virtual absl::StatusOr<JobPlan> PlanPrediction(
      const ::gatescope::v1::PredictRequest& request,
      ::gatescope::v1::PredictResponse* response) const = 0;
  virtual absl::StatusOr<JobPlan> PlanExplanation(
      const ::gatescope::v1::ExplainRequest& request,
      ::gatescope::v1::ExplainResponse* response) const = 0;
  virtual absl::StatusOr<InferWork> PlanInfer(const ::inference::ModelInferRequest& request) const = 0;
  // forward()'s outputs with their per-example shapes, then the task's own.
  virtual std::vector<DeclaredTensor> DeclaredOutputs() const = 0;

  // A forward() output FP32 with its per-example shape.
  static DeclaredTensor Float32(const std::string& name, std::vector<int64_t> shape);

 private:
  // The job of a gatescope.v1 request whose task part is `plan` (an explanation's byte
  // budget is checked for the model's own size now, for the input's before the pass).
  template <typename Request>
  absl::StatusOr<std::unique_ptr<InferenceJob>> V1Job(const Request& request,
                                                      absl::StatusOr<JobPlan> plan,
                                                      CallDone done) const;

  const ModelConfig config_;
  const TaskOptions options_;
};

}  // namespace gatescope
