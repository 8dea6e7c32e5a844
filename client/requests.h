// The gatescope.v1 requests a command's options ask for. Pure: no channel.
#pragma once

#include <string>

#include "client/input_image.h"
#include "client/options.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

// Predict of one input: `bytes` as an encoded image, or as a raw tensor with --raw-shape.
// Detection settings are set only when given (other models refuse them).
v1::PredictRequest PredictRequestFor(const PredictOptions& options, std::string bytes);

// Predict of `input`: a text (model, version, top-k and the text only), else as above.
v1::PredictRequest PredictRequestFor(const PredictOptions& options, const InputImage& input);

// Explain of `model` on `image` (encoded bytes) with the rollout settings that were given.
v1::ExplainRequest RolloutRequestFor(const ExplainOptions& options, const std::string& model,
                                     std::string image);

// RolloutRequestFor the options' model, plus the maps, layers, heads, queries, query pixel
// and detection settings asked for.
v1::ExplainRequest ExplainRequestFor(const ExplainOptions& options, std::string image);

// ExplainRequestFor `input`: a text goes in the request's text, and without heatmap_png
// (an image picture; text models refuse it).
v1::ExplainRequest ExplainRequestFor(const ExplainOptions& options, const InputImage& input);

// Puts `text` in `request`'s input (replacing an image there) and asks no image picture.
void SetText(std::string text, v1::ExplainRequest& request);

}  // namespace gatescope::client
