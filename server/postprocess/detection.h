// Turns one example's detector outputs into detections in the input's pixel coordinates,
// as the public Deformable-DETR post-processing (and models/gatescope/detection.py's
// decode). Pure ATen, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "gatescope/v1/model_config.pb.h"

namespace gatescope {

struct DetectionOptions {
  float score_threshold = 0.f;  // keep scores strictly above it
  int64_t max_detections = 1;   // keep at most this many (>= 1)
};

struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // pixels; the image spans 0..W x 0..H
  float score = 0;
  int64_t label = 0;  // class index
  int64_t query = 0;  // object query that produced it
};

// A request's options from its fields and the model's defaults: threshold unset -> the
// model's; max_detections 0 -> the model's. INVALID_ARGUMENT for a threshold outside
// [0, 1) (NaN included) or a negative max_detections.
absl::StatusOr<DetectionOptions> ResolveDetectionOptions(
    const ::gatescope::v1::DetectionConfig& config, std::optional<float> score_threshold,
    int64_t max_detections);

// `logits` [Q, C] and `boxes` [Q, 4] (cx, cy, w, h normalised) of one example of an image
// of `height` x `width` pixels. Scores are sigmoid(logits); the top min(max_detections,
// Q * C) (query, class) pairs by score (torch.topk's order over the flattened [Q * C]
// scores), then those above the threshold, highest first. INTERNAL for malformed or
// non-finite outputs.
absl::StatusOr<std::vector<Detection>> DecodeDetections(const at::Tensor& logits,
                                                        const at::Tensor& boxes, int64_t height,
                                                        int64_t width,
                                                        const DetectionOptions& options);

}  // namespace gatescope
