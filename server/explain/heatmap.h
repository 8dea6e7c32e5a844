// Heatmap overlays of explanation maps. Pure OpenCV, thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace gatescope {

// Renders `map` ([h, w], any range; min-max scaled to 0..255) with the JET colormap,
// resized to the input's size, blended 50/50 over the input image (`image_bytes`, an
// encoded PNG/JPEG), and returns the PNG bytes. INVALID_ARGUMENT if the image is bad.
absl::StatusOr<std::string> RenderOverlayPng(const at::Tensor& map, std::string_view image_bytes);

}  // namespace gatescope
