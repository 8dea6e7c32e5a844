// The outputs of a KServe v2 ModelInfer response beyond forward()'s raw tensors: the
// segmentation mask and the post-processed detections, with their declared shapes for
// ModelMetadata / ModelConfig. Pure (no gRPC calls), thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"
#include "inference/model_config.pb.h"
#include "server/config/model_config.h"
#include "server/postprocess/detection.h"
#include "server/preprocess/normalize.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

// Segmentation models' extra output: UINT8 [B, H0, W0] class indices at the input's size.
inline constexpr char kMaskOutput[] = "mask";
// Detection models' extra outputs (the TensorFlow Object Detection API's names), K =
// the request's max_detections (capped at queries * classes), rows past num_detections
// padded with zero boxes and scores and class -1:
//   detection_boxes FP32 [B, K, 4] (x1, y1, x2, y2 input pixels), detection_scores FP32
//   [B, K], detection_classes INT64 [B, K] (label indices), num_detections INT64 [B].
inline constexpr char kDetectionBoxes[] = "detection_boxes";
inline constexpr char kDetectionScores[] = "detection_scores";
inline constexpr char kDetectionClasses[] = "detection_classes";
inline constexpr char kNumDetections[] = "num_detections";

// A declared output: name, datatypes and per-example shape (-1: varies).
struct DeclaredOutput {
  std::string name;
  std::string datatype;       // ModelMetadata's ("FP32", "UINT8", "INT64")
  ::inference::DataType type;  // ModelConfig's
  std::vector<int64_t> shape;
};

// forward()'s outputs and the task's extra outputs, in that order.
std::vector<DeclaredOutput> DeclaredOutputs(const ModelConfig& config);

// True if `name` is one of the task's extra outputs.
bool IsPostprocessedOutput(const ModelConfig& config, const std::string& name);

// The request parameters "score_threshold" (double_param) and "max_detections"
// (int64_param) as detection options: INVALID_ARGUMENT for other parameter types, values
// RequestDetectionOptions refuses, or either on a model that is not a detector.
absl::StatusOr<DetectionOptions> DetectionParameters(
    const ModelConfig& config,
    const google::protobuf::Map<std::string, ::inference::InferParameter>& params);

// Adds the task's extra outputs to one example's outputs: the mask of a segmentation model
// at `size`, or the detections of a detection model. INTERNAL for malformed outputs.
absl::Status AddPostprocessedOutputs(const ModelConfig& config, ImageSize size,
                                     const DetectionOptions& options, NamedTensors& outputs);

}  // namespace gatescope
