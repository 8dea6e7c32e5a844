// Parsing and validation of a model's self-description (gatescope.json).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "gatescope/v1/model_config.pb.h"

namespace gatescope {

using ModelConfig = ::gatescope::v1::ModelConfig;
using InputSpec = ::gatescope::v1::InputSpec;

// Parses JSON (snake_case or camelCase field names; unknown fields rejected), fills
// defaults (scale 1/255, color from channel count, mean 0 / std 1) and validates.
// INVALID_ARGUMENT names the offending field.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json);

// Checks a config already in memory; same rules as ParseModelConfig.
absl::Status ValidateModelConfig(const ModelConfig& config);

}  // namespace gatescope
