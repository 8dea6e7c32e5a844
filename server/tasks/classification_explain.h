// The explanations of the image classifiers (token models): their options from either
// API, the map layout their metadata declares, and the maps into a gatescope.v1 response.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gatescope/v1/inference.pb.h"
#include "inference/grpc_service.pb.h"
#include "server/config/model_config.h"
#include "server/explain/token_maps.h"

namespace gatescope {

// The map layout a classifier's metadata declares.
MapLayout TokenLayoutOf(const ModelConfig& config);

// The explain options of a gatescope.v1 ExplainRequest.
ExplainOptions ExplainOptionsOf(const ::gatescope::v1::ExplainRequest& request);

// KServe request parameters that turn ModelInfer into an explanation (docs/explain.md):
// "explain" = comma-separated kinds among rollout, gates, resonance, plug_gates;
// "explain_attention_layers" = comma-separated layers for full maps, optionally
// restricted by "explain_attention_heads" and "explain_attention_queries" (token indices);
// "rollout_head_fusion", "rollout_signed_maps" (strings), "rollout_discard_ratio" (double),
// "rollout_start_layer" (int64). nullopt when the request asks for no explanation;
// INVALID_ARGUMENT for unknown kinds or malformed values.
absl::StatusOr<std::optional<ExplainOptions>> ExplainParameters(
    const ::inference::ModelInferRequest& request);

// The names of the parameters ExplainParameters reads.
std::vector<std::string> ExplainParameterNames();

// The maps into `response` (rollout, gates, attention, resonance, vigilance,
// attention_resonance, plug_gates).
void FillTokenMaps(const TokenMaps& maps, ::gatescope::v1::ExplainResponse* response);

}  // namespace gatescope
