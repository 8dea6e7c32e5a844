#include "server/postprocess/detection.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/isfinite.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gatescope {

absl::StatusOr<DetectionOptions> ResolveDetectionOptions(const v1::DetectionConfig& config,
                                                         std::optional<float> score_threshold,
                                                         int64_t max_detections) {
  DetectionOptions options;
  options.score_threshold = score_threshold.value_or(config.score_threshold());
  if (!(options.score_threshold >= 0.f && options.score_threshold < 1.f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("score_threshold must be in [0, 1), got ", options.score_threshold));
  }
  if (max_detections < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_detections must be >= 0 (0: the model's default), got ",
                     max_detections));
  }
  options.max_detections = max_detections == 0 ? config.max_detections() : max_detections;
  return options;
}

absl::StatusOr<std::vector<Detection>> DecodeDetections(const at::Tensor& logits,
                                                        const at::Tensor& boxes, int64_t height,
                                                        int64_t width,
                                                        const DetectionOptions& options) {
  if (logits.dim() != 2 || boxes.dim() != 2 || boxes.size(1) != 4 ||
      boxes.size(0) != logits.size(0) || logits.numel() == 0) {
    return absl::InternalError(absl::StrCat("detector outputs must be logits [Q, C] and boxes [Q, 4]",
                                            ", got ", logits.dim(), "-D and ", boxes.dim(), "-D"));
  }
  if (height <= 0 || width <= 0 || options.max_detections < 1) {
    return absl::InternalError("image size and max_detections must be positive");
  }
  if (!at::isfinite(logits).all().item<bool>() || !at::isfinite(boxes).all().item<bool>()) {
    return absl::InternalError("detector outputs are not finite (NaN or infinite logits or boxes)");
  }
  const int64_t classes = logits.size(1);
  const at::Tensor scores_all = logits.to(at::kFloat).sigmoid().reshape({-1});
  const int64_t k = std::min(options.max_detections, scores_all.numel());
  auto [scores, index] = scores_all.topk(k);
  const at::Tensor b = boxes.to(at::kFloat).contiguous();
  const auto s = scores.accessor<float, 1>();
  const auto idx = index.accessor<int64_t, 1>();
  const auto box = b.accessor<float, 2>();
  const float w = static_cast<float>(width), h = static_cast<float>(height);
  std::vector<Detection> out;
  for (int64_t i = 0; i < k; ++i) {
    if (!(s[i] > options.score_threshold)) break;  // descending: the rest are lower
    Detection d;
    d.query = idx[i] / classes;
    d.label = idx[i] % classes;
    d.score = s[i];
    const float cx = box[d.query][0], cy = box[d.query][1];
    const float bw = box[d.query][2], bh = box[d.query][3];
    // Same operation order as box_cxcywh_to_xyxy followed by the pixel scale.
    d.x1 = (cx - 0.5f * bw) * w;
    d.y1 = (cy - 0.5f * bh) * h;
    d.x2 = (cx + 0.5f * bw) * w;
    d.y2 = (cy + 0.5f * bh) * h;
    out.push_back(d);
  }
  return out;
}

}  // namespace gatescope
