// Parsing of a model's self-description (gatescope.json) and the checks every task
// shares. Task-specific rules (input kind, outputs, maps) belong to the task
// (server/tasks), which is chosen from `task` once the common checks pass.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "gatescope/v1/model_config.pb.h"

namespace gatescope {

using ModelConfig = ::gatescope::v1::ModelConfig;
using InputSpec = ::gatescope::v1::InputSpec;
using TextConfig = ::gatescope::v1::TextConfig;

// InputSpec.normalization values ("" means kMeanStd).
inline constexpr char kMeanStd[] = "mean_std";
inline constexpr char kMinMax[] = "minmax";

// Parses JSON (snake_case or camelCase field names; unknown fields rejected) and checks
// what every task needs: a task name, labels, a "logits" output, max_batch_size, layers
// and heads >= 0, a well-formed token_grid. INVALID_ARGUMENT names the offending field.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json);

// For tasks whose input is an image: fills defaults (scale 1/255, color from the channel
// count, mean 0 / std 1 per channel) and checks the input spec: shape [C, H, W] with
// entries in 1..8192, gray with C = 1 or rgb with C = 3, the normalisation, mean/std per
// channel, and the any_size bounds (native_size, min_side and max_pixels need any_size).
absl::Status NormaliseImageInput(InputSpec& input);

// True if `kind` is among the config's declared maps.
bool DeclaresMap(const ModelConfig& config, std::string_view kind);

// True if `name` is among the config's declared forward() outputs.
bool DeclaresOutput(const ModelConfig& config, std::string_view name);

// normalization "minmax".
bool UsesMinMax(const InputSpec& spec);

}  // namespace gatescope
