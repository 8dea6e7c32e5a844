// Task "image_classification": forward() returns "logits" [B, classes] (and optional
// per-layer statistics [B, layers]); predictions are the top-k classes; explanations are
// the token maps of ViT-style models (rollout, gates, resonance, PLuG gates, per-layer
// attention), through gatescope.v1 Explain or KServe ModelInfer parameters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/explain/token_maps.h"
#include "server/tasks/image_task.h"

namespace gatescope {

class ClassificationTask final : public ImageTask {
 public:
  static constexpr char kName[] = "image_classification";
  // INVALID_ARGUMENT for an image input spec NormaliseImageInput refuses.
  static absl::StatusOr<std::unique_ptr<Task>> Create(const ModelConfig& config,
                                                      const TaskOptions& options);
  // The KServe explanation parameters (classification_explain.h).
  static std::vector<std::string> Parameters();

  absl::StatusOr<std::unique_ptr<InferenceJob>> Predict(
      const ::gatescope::v1::PredictRequest& request,
      ::gatescope::v1::PredictResponse* response, CallDone done) const override;
  // Also INVALID_ARGUMENT for query_pixel, heatmap_png without an image input and rollout,
  // and maps the model lacks (see TokenMapCollector::Create).
  absl::StatusOr<std::unique_ptr<InferenceJob>> Explain(
      const ::gatescope::v1::ExplainRequest& request,
      ::gatescope::v1::ExplainResponse* response, CallDone done) const override;
  // With explanation parameters, each example is an explanation pass returning "logits"
  // and the explanation tensors (TokenMapTensors).
  absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> Infer(
      const ::inference::ModelInferRequest& request,
      const std::shared_ptr<InferResults>& results) const override;
  // "logits" [classes]; per-layer statistics [layers].
  KServeSignature Signature() const override;

 private:
  using ImageTask::ImageTask;
  // A collector for `options`, checked against the byte budget for the model's size.
  absl::StatusOr<std::shared_ptr<TokenMapCollector>> StartExplanation(
      const ExplainOptions& options) const;
};

}  // namespace gatescope
