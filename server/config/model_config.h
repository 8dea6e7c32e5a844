// Parsing and validation of a model's self-description (gatescope.json).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "gatescope/v1/model_config.pb.h"

namespace gatescope {

using ModelConfig = ::gatescope::v1::ModelConfig;
using InputSpec = ::gatescope::v1::InputSpec;

// ModelConfig.task values.
inline constexpr char kImageClassification[] = "image_classification";
inline constexpr char kImageSegmentation[] = "image_segmentation";
inline constexpr char kObjectDetection[] = "object_detection";
// InputSpec.normalization values ("" means kMeanStd).
inline constexpr char kMeanStd[] = "mean_std";
inline constexpr char kMinMax[] = "minmax";

// Parses JSON (snake_case or camelCase field names; unknown fields rejected), fills
// defaults (scale 1/255, color from channel count, mean 0 / std 1) and validates.
// INVALID_ARGUMENT names the offending field.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json);

// Checks a config already in memory; same rules as ParseModelConfig. Besides the shape,
// colour and normalisation of the input: task image_classification, image_segmentation
// (with 2..256 labels and only "attention" / "gate" maps) or object_detection (outputs
// "logits" and "boxes", a complete `detection` message, any_size with native_size, maps
// "sampling_points" / "plug_gate", layers = encoder + decoder layers); outputs include
// "logits". input.any_size is accepted for every task (classifiers then take pixel
// tensors of any size too, resized like a segmentation model's); native_size, min_side and
// max_pixels need it.
absl::Status ValidateModelConfig(const ModelConfig& config);

// Task image_segmentation.
bool IsSegmentation(const ModelConfig& config);
// Task object_detection.
bool IsDetection(const ModelConfig& config);

// normalization "minmax".
bool UsesMinMax(const InputSpec& spec);

}  // namespace gatescope
