// What gatescope-client writes for segmentation models: the class map over the input
// (with a legend), the raw class indices, and an explanation's per-stage maps as panels
// and .npy files. Uses the gatescope.v1 messages, no channel.
#pragma once

#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

// True if `t` is UINT8 [H0, W0] holding exactly its bytes; then `mask` is a CV_8UC1 copy.
// Otherwise false with `why`.
bool MaskFromProto(const ::gatescope::v1::Tensor& t, cv::Mat& mask, std::string& why);

// JSON object members, each after a comma: "height", "width" (of the mask) and
// "class_pixels": {"<label>": pixels, ...} in label order (labels missing from `labels`
// are named by their index).
std::string SegmentationJson(const ::gatescope::v1::Segmentation& seg,
                             const std::vector<std::string>& labels);

// Predict outputs, at paths `prefix` + name:
//   mask.png           SegmentationPicture: the classes over `image` (empty: colours only),
//                      with a legend;
//   mask_raw.png       the server's mask_png when present, else the mask encoded here
//                      (8-bit gray, pixel value = class index);
//   probabilities.npy  float32 [classes, H0, W0], when the response has probabilities.
// Appends a `,"<key>":"<path>"` JSON member per file to `json` (keys mask, mask_raw,
// probabilities). False with `why` if the response is malformed or a write fails.
bool WritePredictFiles(const std::string& prefix, const cv::Mat& image,
                       const ::gatescope::v1::Segmentation& seg,
                       const std::vector<std::string>& labels, std::string& json, std::string& why);

// Explain outputs, at paths `prefix` + name:
//   mask.png                   as for predict;
//   gates.png                  with gates: the input, then each stage's gate map upsampled
//                              over it (coarse to fine);
//   gate.s<k>.npy              float32 [h_k, w_k] per stage k;
//   query_attention.png        with a query: the same panel of the query's attention, the
//                              query pixel marked on every tile;
//   query_attention.s<k>.npy   float32 [h_k, w_k] per stage k.
// `query` is null without a query pixel. JSON members as for predict (keys mask, gates,
// query_attention, npy: [paths]).
bool WriteExplainFiles(const std::string& prefix, const cv::Mat& image,
                       const ::gatescope::v1::ExplainResponse& resp,
                       const ::gatescope::v1::QueryPixel* query,
                       const std::vector<std::string>& labels, std::string& json, std::string& why);

}  // namespace gatescope::client
