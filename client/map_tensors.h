// Explanation maps (gatescope.v1.Tensor, FLOAT32) checked, stacked, and viewed as OpenCV
// matrices or JSON. No channel; the views copy, so the Tensor may go away after a call.
#pragma once

#include <cstdint>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

using TensorList = google::protobuf::RepeatedPtrField<::gatescope::v1::Tensor>;

// OK if `t` is FLOAT32 with `rank` non-negative dims and exactly their elements' bytes;
// otherwise an error naming the map `name`.
absl::Status CheckMap(const ::gatescope::v1::Tensor& t, int rank, const std::string& name);

// One map per layer stacked to [L, ...]: its shape and little-endian float32 bytes.
struct StackedMaps {
  std::vector<int64_t> shape;
  std::string bytes;
};

// The layers' maps of `rank` dims each (e.g. [H, gh, gw]) stacked; an error if a layer is
// malformed or the shapes differ. Empty (no shape) for no layers.
absl::StatusOr<StackedMaps> StackLayers(const TensorList& layers, const std::string& name,
                                        int rank = 3);

// A JSON array of a checked map, nested by its shape; and a JSON array of such arrays.
std::string TensorJson(const ::gatescope::v1::Tensor& t);
std::string TensorListJson(const TensorList& ts);

// Views of checked maps as CV_32FC1 matrices:
//   GridMat: a [rows, cols] map;
//   HeadMeanMat: the mean over heads of an [H, rows, cols] map;
//   GateRowMat: row 0 of a [queries, N] map over the patches, as a square grid (tokens: a
//     class token, then the grid row-major); empty if N - 1 is not a square.
cv::Mat GridMat(const ::gatescope::v1::Tensor& t);
cv::Mat HeadMeanMat(const ::gatescope::v1::Tensor& t);
cv::Mat GateRowMat(const ::gatescope::v1::Tensor& t);

}  // namespace gatescope::client
