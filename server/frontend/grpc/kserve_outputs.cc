#include "server/frontend/grpc/kserve_outputs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/frontend/grpc/detection_call.h"
#include "server/postprocess/segmentation.h"

namespace gatescope {
namespace {

namespace kv = ::inference;

// Per-example shape of a forward output: [classes] for "logits" ([classes, H, W] for
// segmentation, [queries, classes] for detection), [queries, 4] for detection "boxes",
// [layers] for the per-layer statistics ("gate_mean", "vigilance_mean").
std::vector<int64_t> ForwardOutputShape(const ModelConfig& config, const std::string& name) {
  if (IsDetection(config)) {
    const int64_t q = config.detection().queries();
    return name == "boxes" ? std::vector<int64_t>{q, 4}
                           : std::vector<int64_t>{q, config.labels_size()};
  }
  if (name != "logits") return {config.layers()};
  if (!IsSegmentation(config)) return {config.labels_size()};
  return {config.labels_size(), config.input().shape(1), config.input().shape(2)};
}

absl::Status AddMask(ImageSize size, int64_t classes, NamedTensors& outputs) {
  auto logits = outputs.find("logits");
  if (logits == outputs.end()) return absl::InternalError("model returned no 'logits'");
  SegmentationOptions options;
  options.classes = classes;
  auto seg = SegmentLogits(logits->second, size.height, size.width, options);
  if (!seg.ok()) return seg.status();
  outputs.insert_or_assign(kMaskOutput, seg->mask);
  return absl::OkStatus();
}

absl::Status AddDetections(const ModelConfig& config, ImageSize size,
                           const DetectionOptions& options, NamedTensors& outputs) {
  auto dets = DetectionsOf(outputs, size, options, config);
  if (!dets.ok()) return dets.status();
  const int64_t k = std::min<int64_t>(
      options.max_detections, int64_t{config.detection().queries()} * config.labels_size());
  at::Tensor xyxy = at::zeros({k, 4}, at::kFloat);
  at::Tensor scores = at::zeros({k}, at::kFloat);
  at::Tensor classes = at::full({k}, -1, at::kLong);
  auto b = xyxy.accessor<float, 2>();
  auto s = scores.accessor<float, 1>();
  auto c = classes.accessor<int64_t, 1>();
  for (size_t i = 0; i < dets->size(); ++i) {
    const Detection& d = (*dets)[i];
    b[i][0] = d.x1;
    b[i][1] = d.y1;
    b[i][2] = d.x2;
    b[i][3] = d.y2;
    s[i] = d.score;
    c[i] = d.label;
  }
  outputs.insert_or_assign(kDetectionBoxes, xyxy);
  outputs.insert_or_assign(kDetectionScores, scores);
  outputs.insert_or_assign(kDetectionClasses, classes);
  outputs.insert_or_assign(kNumDetections,
                           at::scalar_tensor(static_cast<int64_t>(dets->size()), at::kLong));
  return absl::OkStatus();
}

std::vector<DeclaredOutput> ExtraOutputs(const ModelConfig& config) {
  if (IsSegmentation(config)) {
    const bool any = config.input().any_size();
    return {{kMaskOutput, "UINT8", kv::TYPE_UINT8,
             any ? std::vector<int64_t>{-1, -1}
                 : std::vector<int64_t>{config.input().shape(1), config.input().shape(2)}}};
  }
  if (IsDetection(config)) {
    return {{kDetectionBoxes, "FP32", kv::TYPE_FP32, {-1, 4}},
            {kDetectionScores, "FP32", kv::TYPE_FP32, {-1}},
            {kDetectionClasses, "INT64", kv::TYPE_INT64, {-1}},
            {kNumDetections, "INT64", kv::TYPE_INT64, {}}};
  }
  return {};
}

}  // namespace

std::vector<DeclaredOutput> DeclaredOutputs(const ModelConfig& config) {
  std::vector<DeclaredOutput> out;
  for (const auto& name : config.outputs()) {
    out.push_back({name, "FP32", kv::TYPE_FP32, ForwardOutputShape(config, name)});
  }
  for (auto& extra : ExtraOutputs(config)) out.push_back(std::move(extra));
  return out;
}

bool IsPostprocessedOutput(const ModelConfig& config, const std::string& name) {
  for (const auto& extra : ExtraOutputs(config)) {
    if (extra.name == name) return true;
  }
  return false;
}

absl::StatusOr<DetectionOptions> DetectionParameters(
    const ModelConfig& config, const google::protobuf::Map<std::string, kv::InferParameter>& params) {
  std::optional<float> threshold;
  int64_t max_detections = 0;
  if (auto it = params.find("score_threshold"); it != params.end()) {
    if (it->second.parameter_choice_case() != kv::InferParameter::kDoubleParam) {
      return absl::InvalidArgumentError("score_threshold parameter must be a double_param");
    }
    threshold = static_cast<float>(it->second.double_param());
  }
  if (auto it = params.find("max_detections"); it != params.end()) {
    if (it->second.parameter_choice_case() != kv::InferParameter::kInt64Param) {
      return absl::InvalidArgumentError("max_detections parameter must be an int64_param");
    }
    max_detections = it->second.int64_param();
  }
  return RequestDetectionOptions(config, threshold, max_detections);
}

absl::Status AddPostprocessedOutputs(const ModelConfig& config, ImageSize size,
                                     const DetectionOptions& options, NamedTensors& outputs) {
  if (IsSegmentation(config)) return AddMask(size, config.labels_size(), outputs);
  if (IsDetection(config)) return AddDetections(config, size, options, outputs);
  return absl::OkStatus();
}

}  // namespace gatescope
