// Per-model serving settings: config.pbtxt (Triton field names) over server defaults.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "gatescope/v1/model_config.pb.h"
#include "server/config/batching_config.h"

namespace gatescope {

struct ServingDefaults {
  int max_batch_size = 16;        // capped by the model's own max_batch_size
  int max_queue_size = 256;       // per priority level
  absl::Duration max_queue_delay = absl::ZeroDuration();
  int instances = 1;
};

struct ServingPlan {
  DynamicBatchingConfig batching;
  int instances = 1;
};

// Parses config.pbtxt text (empty text: no overrides). INVALID_ARGUMENT on syntax errors
// or unknown fields, with the parser's line and column.
absl::StatusOr<::gatescope::v1::ServingConfig> ParseServingConfig(std::string_view text);

// Combines server defaults, the archive's max_batch_size (0: none) and the overrides.
// INVALID_ARGUMENT for out-of-range values.
absl::StatusOr<ServingPlan> MakeServingPlan(const ServingDefaults& defaults,
                                            int model_max_batch_size,
                                            const ::gatescope::v1::ServingConfig& overrides);

}  // namespace gatescope
