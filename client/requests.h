// The gatescope.v1 requests a command's options ask for. Pure: no channel.
#pragma once

#include <string>

#include "client/options.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

// Predict of one input: `bytes` as an encoded image, or as a raw tensor with --raw-shape.
// Detection settings are set only when given (other models refuse them).
v1::PredictRequest PredictRequestFor(const PredictOptions& options, std::string bytes);

// Explain of `model` on `image` (encoded bytes) with the rollout settings that were given.
v1::ExplainRequest RolloutRequestFor(const ExplainOptions& options, const std::string& model,
                                     std::string image);

// RolloutRequestFor the options' model, plus the maps, layers, heads, queries, query pixel
// and detection settings asked for.
v1::ExplainRequest ExplainRequestFor(const ExplainOptions& options, std::string image);

}  // namespace gatescope::client
