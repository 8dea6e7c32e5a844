// Explanation panels: the input image and heatmap overlays side by side, each captioned.
// Pure OpenCV (no gRPC); OpenCV may throw cv::Exception on allocation failures.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>

namespace gatescope::client {

// Height of the caption strip under every tile.
constexpr int kCaptionHeight = 30;

// Decodes PNG/JPEG bytes to 8-bit BGR (grayscale inputs become three equal channels);
// an empty Mat if they cannot be decoded.
cv::Mat DecodeBgr(std::string_view bytes);

// The tile size for an input of `input` size: the same aspect ratio, the height clamped to
// [min_height, max_height] (width at least 1).
cv::Size TileSize(cv::Size input, int min_height = 112, int max_height = 224);

// The mean over heads of a row-major float32 [heads, rows, cols] array, as a CV_32FC1
// rows x cols Mat. Empty if a count is not positive.
cv::Mat HeadMean(const float* data, int heads, int rows, int cols);

// `image` (8-bit BGR, or grayscale: made BGR) resized to `tile`: nearest-neighbour when
// enlarging, area when shrinking.
cv::Mat InputTile(const cv::Mat& image, cv::Size tile);

// `map` (CV_32FC1, any range; non-finite values drawn as the finite minimum; a constant
// map as 0) min-max scaled to 0..255, resized bilinearly to `tile`, coloured with
// COLORMAP_JET and blended 50/50 over InputTile(image, tile). Empty if `map` is empty or
// not CV_32FC1.
cv::Mat OverlayTile(const cv::Mat& image, const cv::Mat& map, cv::Size tile);

// The tiles (CV_8UC3, all the same size) left to right over a caption strip each: width
// tiles.size() * tile width, height tile height + kCaptionHeight. Captions wrap onto two
// lines and shrink to fit. Empty if there are no tiles, the sizes or types differ, or the
// caption count is not the tile count.
cv::Mat ComposePanel(const std::vector<cv::Mat>& tiles, const std::vector<std::string>& captions);

// `render()`, or an empty Mat (which WritePng refuses) if OpenCV throws.
template <typename Render>
cv::Mat Rendered(Render render) {
  try {
    return render();
  } catch (const cv::Exception&) {
    return {};
  }
}

}  // namespace gatescope::client
