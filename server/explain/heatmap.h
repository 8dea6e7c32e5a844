// Heatmap overlays of explanation maps. Pure (OpenCV core and imgproc; the input is decoded
// and the picture written by libpng / libjpeg-turbo, never cv::imdecode / imencode),
// thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace gatescope {

// Renders `map` ([h, w], any range) on its honest colour scale (colour_scale.h: viridis
// from 0 for a non-negative map, blue-grey-red about 0 for a signed one), resized to the
// input's size over a grey copy of the input image (`image_bytes`, an encoded PNG/JPEG
// whose size the caller has checked: it is decoded whole), enlarged by a whole factor to at
// least 160 pixels wide, with the colour bar (scale ends, the map's own range ticked) under
// it; returns the PNG bytes. INVALID_ARGUMENT if the image is bad.
absl::StatusOr<std::string> RenderOverlayPng(const at::Tensor& map, std::string_view image_bytes);

}  // namespace gatescope
