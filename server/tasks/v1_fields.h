// The gatescope.v1 request fields that belong to one task, for the other tasks to refuse
// (the v1 messages are flat: every task's fields sit side by side).
#pragma once

#include "absl/status/status.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope {

// The first classifier-only explain option `r` sets (rollout or non-default
// rollout_options, attention_layers / attention_heads / attention_queries, resonance,
// heatmap_png), as the name to report, or nullptr.
const char* ClassifierExplainOption(const ::gatescope::v1::ExplainRequest& r);

// INVALID_ARGUMENT when a detection field (score_threshold, max_detections) is set.
template <typename Request>
absl::Status RefuseDetectionFields(const Request& request) {
  if (request.has_score_threshold() || request.max_detections() != 0) {
    return absl::InvalidArgumentError(
        "score_threshold and max_detections apply to detection models only");
  }
  return absl::OkStatus();
}

}  // namespace gatescope
