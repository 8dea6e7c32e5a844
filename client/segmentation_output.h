// What gatescope-client writes for segmentation models: the class map over the input
// (with a legend), the raw class indices, and an explanation's per-stage maps as panels
// and .npy files. Uses the gatescope.v1 messages, no channel.
#pragma once

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/task_output.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

// A CV_8UC1 copy of `t` if it is UINT8 [H0, W0] holding exactly its bytes; else an error.
absl::StatusOr<cv::Mat> MaskFromProto(const ::gatescope::v1::Tensor& t);

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
// probabilities). An error if the response is malformed or a write fails.
absl::Status WritePredictFiles(const std::string& prefix, const cv::Mat& image,
                               const ::gatescope::v1::Segmentation& seg,
                               const std::vector<std::string>& labels, std::string& json);

// Explain outputs, at paths `prefix` + name:
//   mask.png                   as for predict;
//   gates.png                  with gates: the input, then each stage's gate map upsampled
//                              over it (coarse to fine);
//   gate.s<k>.npy              float32 [h_k, w_k] per stage k;
//   query_attention.png        with a query: the same panel of the query's attention, the
//                              query pixel marked on every tile;
//   query_attention.s<k>.npy   float32 [h_k, w_k] per stage k.
// The query pixel, labels, scale and model come from `settings`. JSON members as for
// predict (keys mask, gates, query_attention, npy: [paths]).
absl::Status WriteExplainFiles(const std::string& prefix, const cv::Mat& image,
                               const ::gatescope::v1::ExplainResponse& resp,
                               const OutputSettings& settings, std::string& json);

// The largest non-background classes with their pixel share ("lesion 12.3%, ..."; at most
// three), or "background only".
std::string SegmentationSummary(const ::gatescope::v1::Segmentation& seg,
                                const std::vector<std::string>& labels);

}  // namespace gatescope::client
