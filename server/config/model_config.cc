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

void FillImageDefaults(InputSpec& in) {
  if (in.scale() == 0.f) in.set_scale(1.f / 255.f);
  if (in.color().empty() && in.shape_size() == 3) in.set_color(in.shape(0) == 3 ? "rgb" : "gray");
  // Defaults only for the channel counts a model may have (1, 3): the checks that follow
  // refuse any other, and a declared count like 4444444441 must not be looped over first.
  const int64_t declared = in.shape_size() == 3 ? in.shape(0) : 0;
  const int channels = declared == 1 || declared == 3 ? static_cast<int>(declared) : 0;
  if (in.mean_size() == 0) {
    for (int c = 0; c < channels; ++c) in.add_mean(0.f);
  }
  if (in.std_size() == 0) {
    for (int c = 0; c < channels; ++c) in.add_std(1.f);
  }
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

absl::Status ValidateCommon(const ModelConfig& config) {
  if (config.task().empty()) return Invalid("task must be set");
  if (config.labels_size() < 1) return Invalid("labels must not be empty");
  if (!DeclaresOutput(config, "logits")) return Invalid("outputs must include 'logits'");
  if (config.max_batch_size() < 0) return Invalid("max_batch_size must be >= 0");
  if (config.layers() < 0 || config.heads() < 0) return Invalid("layers and heads must be >= 0");
  if (config.token_grid_size() != 0 &&
      (config.token_grid_size() != 2 || config.token_grid(0) <= 0 || config.token_grid(1) <= 0)) {
    return Invalid("token_grid must be [rows, cols] with positive entries");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status NormaliseImageInput(InputSpec& in) {
  FillImageDefaults(in);
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
  return absl::OkStatus();
}

bool DeclaresMap(const ModelConfig& config, std::string_view kind) {
  for (const auto& m : config.maps()) {
    if (m == kind) return true;
  }
  return false;
}

bool DeclaresOutput(const ModelConfig& config, std::string_view name) {
  for (const auto& o : config.outputs()) {
    if (o == name) return true;
  }
  return false;
}

bool UsesMinMax(const InputSpec& spec) { return spec.normalization() == kMinMax; }

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json) {
  ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &config, options);
  if (!st.ok()) return Invalid(absl::StrCat("bad JSON: ", st.ToString()));
  GS_RETURN_IF_ERROR(ValidateCommon(config));
  return config;
}

}  // namespace gatescope
