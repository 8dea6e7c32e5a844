// Task "object_detection": forward() returns "logits" [B, Q, classes] and "boxes"
// [B, Q, 4]; predictions are the public Deformable-DETR top-k-then-threshold decoding in
// the input's pixels (score_threshold, max_detections). Explanations are each detection's
// decoder sampling points, attention weights and PLuG gates, and the encoder's PLuG gate
// maps (gatescope.v1 Explain only). KServe adds detection_boxes / _scores / _classes and
// num_detections.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/postprocess/detection.h"
#include "server/tasks/image_task.h"

namespace gatescope {

class DetectionTask final : public ImageTask {
 public:
  static constexpr char kName[] = "object_detection";
  // KServe's extra outputs (the TensorFlow Object Detection API's names), K = the
  // request's max_detections (capped at queries * classes), rows past num_detections
  // padded with zero boxes and scores and class -1: detection_boxes FP32 [B, K, 4]
  // (x1, y1, x2, y2 input pixels), detection_scores FP32 [B, K], detection_classes INT64
  // [B, K] (label indices), num_detections INT64 [B].
  static constexpr char kBoxes[] = "detection_boxes";
  static constexpr char kScores[] = "detection_scores";
  static constexpr char kClasses[] = "detection_classes";
  static constexpr char kCount[] = "num_detections";

  // INVALID_ARGUMENT unless the image input is valid and the metadata describes a
  // detector: outputs "logits" and "boxes", a complete `detection` message (level_strides
  // for PLuG models), any_size with native_size, maps among "sampling_points" and
  // "plug_gate", layers = encoder + decoder layers.
  static absl::StatusOr<std::unique_ptr<Task>> Create(const ModelConfig& config,
                                                      const TaskOptions& options);
  // "score_threshold" (double_param), "max_detections" (int64_param).
  static std::vector<std::string> Parameters() { return {"score_threshold", "max_detections"}; }

  absl::StatusOr<std::unique_ptr<InferenceJob>> Predict(
      const ::gatescope::v1::PredictRequest& request,
      ::gatescope::v1::PredictResponse* response, CallDone done) const override;
  // Takes plug_gates, score_threshold and max_detections; every other task's option is
  // INVALID_ARGUMENT. The sampling points of every detection are always returned.
  absl::StatusOr<std::unique_ptr<InferenceJob>> Explain(
      const ::gatescope::v1::ExplainRequest& request,
      ::gatescope::v1::ExplainResponse* response, CallDone done) const override;
  absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> Infer(
      const ::inference::ModelInferRequest& request,
      const std::shared_ptr<InferResults>& results) const override;
  // "logits" [Q, classes], "boxes" [Q, 4], then the four detection outputs.
  KServeSignature Signature() const override;

 private:
  using ImageTask::ImageTask;
  // One example's detections for an input of `size`; INTERNAL for missing outputs or
  // shapes other than the metadata declares.
  absl::StatusOr<std::vector<Detection>> Decode(const NamedTensors& outputs, ImageSize size,
                                                const DetectionOptions& options) const;
  // The decoded detections into a gatescope.v1 response, labels named.
  void Fill(const std::vector<Detection>& detections,
            google::protobuf::RepeatedPtrField<::gatescope::v1::Detection>* out) const;
};

}  // namespace gatescope
