// Pictures of a segmentation: the class map coloured over the input with a legend, and a
// marker for a query pixel. Pure OpenCV (no gRPC); OpenCV may throw cv::Exception on
// allocation failures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace gatescope::client {

// The fixed BGR colour of class `index` (0: black, so background only darkens the
// image; 1..19 distinct saturated colours; later indices repeat them, dimmed).
cv::Vec3b ClassColor(int index);

// `mask` (CV_8UC1 class indices) in ClassColor colours blended over `image` (8-bit BGR or
// grayscale; resized to the mask's size when it differs; empty: the colours alone):
// out = (1 - alpha) * image + alpha * colour, per pixel. Empty if `mask` is not CV_8UC1.
cv::Mat MaskOverlay(const cv::Mat& image, const cv::Mat& mask, double alpha = 0.5);

// A legend strip at least `width` pixels wide (wider when a line needs it), one row per
// label: its colour swatch, then "<label>: <pixels> px (<percent>%)". Rows are
// kLegendRowHeight high.
constexpr int kLegendRowHeight = 16;
cv::Mat Legend(const std::vector<std::string>& labels, const std::vector<int64_t>& pixels,
               int width);

// MaskOverlay of `image` and `mask` above its Legend; a legend wider than the overlay
// widens the picture (the overlay is padded with black on the right). Empty if the
// overlay is.
cv::Mat SegmentationPicture(const cv::Mat& image, const cv::Mat& mask,
                            const std::vector<std::string>& labels,
                            const std::vector<int64_t>& pixels);

// Draws a crosshair ring on `tile` (CV_8UC3) at pixel (y, x) of an input of `input` size,
// scaled to the tile's size.
void MarkPixel(cv::Mat& tile, cv::Size input, int y, int x);

}  // namespace gatescope::client
