// What gatescope-client writes for detection models: the detections as JSON, the boxes
// over the input, and an explanation's sampling points, attention weights and PLuG gates
// as a picture and .npy files. Uses the gatescope.v1 messages, no channel.
#pragma once

#include <opencv2/core.hpp>
#include <string>

#include "absl/status/status.h"
#include "client/task_output.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

// A JSON object member, after a comma: "detections":[{"label":..., "label_index":...,
// "score":..., "box":[x1, y1, x2, y2], "query":...}, ...] in the response's order.
std::string DetectionsJson(
    const google::protobuf::RepeatedPtrField<::gatescope::v1::Detection>& detections);

// Predict output `prefix` + "boxes.png": DetectionPicture of the boxes (captions
// "<label> <score>") over `image`, titled with the model. Appends ,"boxes":"<path>" to
// `json`. An error if `image` is empty (raw tensor inputs) or the write fails.
absl::Status WriteDetectionPicture(
    const std::string& prefix, const cv::Mat& image,
    const google::protobuf::RepeatedPtrField<::gatescope::v1::Detection>& detections,
    const OutputSettings& settings, std::string& json);

// Explain outputs, at paths `prefix` + name:
//   sampling_points.png   the boxes and, per detection, the last decoder layer's sampling
//                         points of every head and level (dot size ~ attention weight),
//                         points outside the image in a margin and counted;
//   detection<i>.sampling_points.npy    float32 [Ld, M, L, P, 2] (x, y) pixels;
//   detection<i>.attention_weights.npy  float32 [Ld, M, L, P];
//   detection<i>.plug_gate.npy          float32 [Ld, M, L] (with plug gates);
//   encoder_plug_gates.png  (with plug gates) the input, then per encoder layer e and
//                           level k the gate map (mean over heads and sampled levels);
//   encoder_plug_gate.e<e>.k<k>.npy     float32 [M, L, h_k, w_k].
// JSON members appended to `json`: "sampling_points", "points_outside", "points" (how many
// of how many sampling points fall outside the image), "encoder_plug_gates", "npy": [...].
// An error if the response is malformed or a write fails.
// `settings` gives the model (titles) and the scale mode of the gate panel.
absl::Status WriteDetectionExplainFiles(const std::string& prefix, const cv::Mat& image,
                                        const ::gatescope::v1::ExplainResponse& resp,
                                        const OutputSettings& settings, std::string& json);

// "3 detections, best three 0.91", or "no detections".
std::string DetectionSummary(
    const google::protobuf::RepeatedPtrField<::gatescope::v1::Detection>& detections);

}  // namespace gatescope::client
