// Task "image_segmentation": forward() returns "logits" [B, classes, H, W] at the model's
// size; the class map comes back at the input's own size (mask, class pixel counts,
// optional PNG and probabilities). Explanations are each decoder stage's gate map and the
// attention of a query pixel (gatescope.v1 Explain only). KServe adds the "mask" output.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/tasks/image_task.h"

namespace gatescope {

class SegmentationTask final : public ImageTask {
 public:
  static constexpr char kName[] = "image_segmentation";
  // KServe's extra output: UINT8 [B, H0, W0] class indices at the input's size.
  static constexpr char kMaskOutput[] = "mask";

  // INVALID_ARGUMENT unless the image input is valid, there are 2..256 labels (masks are
  // UINT8) and the declared maps are among "attention" and "gate".
  static absl::StatusOr<std::unique_ptr<Task>> Create(const ModelConfig& config,
                                                      const TaskOptions& options);
  static std::vector<std::string> Parameters() { return {}; }

  absl::StatusOr<std::unique_ptr<InferenceJob>> Predict(
      const ::gatescope::v1::PredictRequest& request,
      ::gatescope::v1::PredictResponse* response, CallDone done) const override;
  // Takes gates and query_pixel; the classifiers' options and plug_gates are
  // INVALID_ARGUMENT, as is a query pixel outside the input (found once it is decoded).
  absl::StatusOr<std::unique_ptr<InferenceJob>> Explain(
      const ::gatescope::v1::ExplainRequest& request,
      ::gatescope::v1::ExplainResponse* response, CallDone done) const override;
  absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> Infer(
      const ::inference::ModelInferRequest& request,
      const std::shared_ptr<InferResults>& results) const override;
  // "logits" [classes, H, W], "mask" UINT8 [H0, W0] (-1 for models of any size).
  KServeSignature Signature() const override;

 private:
  using ImageTask::ImageTask;
};

}  // namespace gatescope
