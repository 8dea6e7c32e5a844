#include "server/config/model_config.h"

#include <google/protobuf/util/json_util.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace gatescope {
namespace {

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model config: ", std::string(what)));
}

void FillDefaults(ModelConfig& config) {
  InputSpec& in = *config.mutable_input();
  if (in.scale() == 0.f) in.set_scale(1.f / 255.f);
  if (in.color().empty() && in.shape_size() == 3) in.set_color(in.shape(0) == 3 ? "rgb" : "gray");
  const int channels = in.shape_size() == 3 ? static_cast<int>(in.shape(0)) : 0;
  if (in.mean_size() == 0) {
    for (int c = 0; c < channels; ++c) in.add_mean(0.f);
  }
  if (in.std_size() == 0) {
    for (int c = 0; c < channels; ++c) in.add_std(1.f);
  }
}

absl::Status ValidateDetection(const ModelConfig& config) {
  const v1::DetectionConfig& d = config.detection();
  if (!config.has_detection() || d.encoder_layers() < 0 || d.decoder_layers() < 1 ||
      d.levels() < 1 || d.points() < 1 || d.queries() < 1 || d.max_detections() < 1) {
    return Invalid(
        "object_detection needs detection {encoder_layers >= 0, decoder_layers, levels, "
        "points, queries, max_detections >= 1}");
  }
  if (!(d.score_threshold() >= 0.f && d.score_threshold() < 1.f)) {
    return Invalid("detection.score_threshold must be in [0, 1)");
  }
  if (config.layers() != d.encoder_layers() + d.decoder_layers() || config.heads() < 1) {
    return Invalid("object_detection: layers must be encoder_layers + decoder_layers, heads >= 1");
  }
  if (!config.input().any_size() || !config.input().native_size()) {
    return Invalid("object_detection needs input.any_size and input.native_size");
  }
  bool has_boxes = false;
  for (const auto& o : config.outputs()) has_boxes |= (o == "boxes");
  if (!has_boxes) return Invalid("object_detection outputs must include 'boxes'");
  for (const auto& kind : config.maps()) {
    if (kind != "sampling_points" && kind != "plug_gate") {
      return Invalid(absl::StrCat(
          "object_detection maps are 'sampling_points' and 'plug_gate', not '", kind, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateInputBounds(const InputSpec& in) {
  if ((in.native_size() || in.min_side() != 0 || in.max_pixels() != 0) && !in.any_size()) {
    return Invalid("input.native_size, min_side and max_pixels need input.any_size");
  }
  if (in.min_side() < 0 || in.max_pixels() < 0 ||
      (in.max_pixels() > 0 && in.max_pixels() < int64_t{in.min_side()} * in.min_side())) {
    return Invalid("input.min_side and input.max_pixels must be >= 0 and admit some image");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& config) {
  const bool segmentation = config.task() == kImageSegmentation;
  const bool detection = config.task() == kObjectDetection;
  if (config.task() != kImageClassification && !segmentation && !detection) {
    return Invalid(absl::StrCat("unsupported task '", config.task(), "' (",
                                kImageClassification, ", ", kImageSegmentation, " or ",
                                kObjectDetection, ")"));
  }
  const InputSpec& in = config.input();
  if (in.shape_size() != 3) return Invalid("input.shape must be [C, H, W]");
  for (int64_t d : in.shape()) {
    if (d <= 0 || d > 8192) return Invalid("input.shape entries must be in 1..8192");
  }
  const int64_t channels = in.shape(0);
  if (!((in.color() == "gray" && channels == 1) || (in.color() == "rgb" && channels == 3))) {
    return Invalid("input.color must be 'gray' with C = 1 or 'rgb' with C = 3");
  }
  if (!in.normalization().empty() && in.normalization() != kMeanStd &&
      in.normalization() != kMinMax) {
    return Invalid(absl::StrCat("input.normalization must be '", kMeanStd, "' or '", kMinMax,
                                "', not '", in.normalization(), "'"));
  }
  GS_RETURN_IF_ERROR(ValidateInputBounds(in));
  if (in.mean_size() != channels || in.std_size() != channels) {
    return Invalid("input.mean and input.std need one value per channel");
  }
  for (float s : in.std()) {
    if (!(s > 0.f)) return Invalid("input.std values must be positive");
  }
  if (!(in.scale() > 0.f)) return Invalid("input.scale must be positive");
  if (config.labels_size() < 1) return Invalid("labels must not be empty");
  if (segmentation && (config.labels_size() < 2 || config.labels_size() > 256)) {
    return Invalid("image_segmentation needs 2..256 labels (masks are UINT8 class indices)");
  }
  bool has_logits = false;
  for (const auto& o : config.outputs()) has_logits |= (o == "logits");
  if (!has_logits) return Invalid("outputs must include 'logits'");
  if (config.max_batch_size() < 0) return Invalid("max_batch_size must be >= 0");
  if (config.layers() < 0 || config.heads() < 0) return Invalid("layers and heads must be >= 0");
  if (config.token_grid_size() != 0 &&
      (config.token_grid_size() != 2 || config.token_grid(0) <= 0 || config.token_grid(1) <= 0)) {
    return Invalid("token_grid must be [rows, cols] with positive entries");
  }
  if (detection) GS_RETURN_IF_ERROR(ValidateDetection(config));
  if (segmentation) {
    for (const auto& kind : config.maps()) {
      if (kind != "attention" && kind != "gate") {
        return Invalid(absl::StrCat("image_segmentation maps are 'attention' and 'gate', not '",
                                    kind, "'"));
      }
    }
  }
  return absl::OkStatus();
}

bool IsSegmentation(const ModelConfig& config) { return config.task() == kImageSegmentation; }

bool IsDetection(const ModelConfig& config) { return config.task() == kObjectDetection; }

bool UsesMinMax(const InputSpec& spec) { return spec.normalization() == kMinMax; }

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json) {
  ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &config, options);
  if (!st.ok()) return Invalid(absl::StrCat("bad JSON: ", st.ToString()));
  FillDefaults(config);
  GS_RETURN_IF_ERROR(ValidateModelConfig(config));
  return config;
}

}  // namespace gatescope
