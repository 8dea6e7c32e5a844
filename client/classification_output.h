// What gatescope-client writes for classifiers: the ranked classes, and an explanation's
// maps as a panel, .npy files or one JSON file. Uses the gatescope.v1 messages, no channel.
#pragma once

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/panel.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

using ClassList = google::protobuf::RepeatedPtrField<::gatescope::v1::ClassScore>;

// [{"label":..., "score":...}, ...] in the response's order.
std::string ClassesJson(const ClassList& classes);

// JSON members of a predict line, each after a comma: "label" and "score" of the first
// class (when there is one), then "topk": ClassesJson.
std::string TopClassesJson(const ClassList& classes);

// OK if every map of `resp` is well formed (as the writers below need).
absl::Status CheckExplainResponse(const ::gatescope::v1::ExplainResponse& resp);

// The input tile, then the rollout, the head-mean gate and resonance map of every layer and
// the PLuG gate row of every layer (those `resp` holds) over `image`, captioned; each kind
// of map on one scale across layers (ScaleMode::kShared) or per tile; titled with
// `model` and the top class with its score.
cv::Mat ExplainPanel(const cv::Mat& image, const ::gatescope::v1::ExplainResponse& resp,
                     const std::string& model, ScaleMode scale);

// "label 0.93" of the top class; "" if there is none.
std::string TopClassText(const ClassList& classes);

// Writes the raw maps of `resp` as <stem>.<map>.npy files and <stem>.json (the classes and
// the .npy file names); returns the .npy paths. `req` names the attention layers.
absl::StatusOr<std::vector<std::string>> WriteNpyOutputs(
    const std::string& file, const std::string& stem, const ::gatescope::v1::ExplainRequest& req,
    const ::gatescope::v1::ExplainResponse& resp);

// Writes <stem>.json with the classes and every map as nested arrays.
absl::Status WriteJsonOutput(const std::string& file, const std::string& stem,
                             const ::gatescope::v1::ExplainResponse& resp);

}  // namespace gatescope::client
