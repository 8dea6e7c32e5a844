#include "server/explain/heatmap.h"

#include <ATen/ATen.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "server/explain/colour_scale.h"

namespace gatescope {
namespace {

constexpr int kMinBarWidth = 160;
constexpr double kMaxPixels = 4e6;

}  // namespace

absl::StatusOr<std::string> RenderOverlayPng(const at::Tensor& map,
                                             std::string_view image_bytes) {
  if (map.dim() != 2 || map.numel() == 0) {
    return absl::InvalidArgumentError("heatmap needs a non-empty [h, w] map");
  }
  try {
    const cv::Mat raw(1, static_cast<int>(image_bytes.size()), CV_8UC1,
                      const_cast<char*>(image_bytes.data()));
    cv::Mat image = cv::imdecode(raw, cv::IMREAD_COLOR);
    if (image.empty()) return absl::InvalidArgumentError("heatmap input image cannot be decoded");
    const at::Tensor m = map.to(at::kFloat).contiguous();
    const cv::Mat small(static_cast<int>(m.size(0)), static_cast<int>(m.size(1)), CV_32FC1,
                        m.data_ptr<float>());
    const MapRange range = RangeOf(small);
    const ColourScale scale = ColourScale::For(range);
    cv::Mat resized, grey, grey_bgr, blended, picture;
    resized = ResizeMap(small, image.size());
    cv::cvtColor(image, grey, cv::COLOR_BGR2GRAY);
    cv::cvtColor(grey, grey_bgr, cv::COLOR_GRAY2BGR);
    cv::addWeighted(grey_bgr, 0.3, Colourize(resized, scale), 0.7, 0.0, blended);
    // The colour bar needs some width to be legible: small inputs are enlarged by a whole
    // factor, never beyond kMaxPixels (a 1 x 8192 input is not enlarged 160 times), and a
    // picture still narrower than the bar is padded.
    const double area = static_cast<double>(blended.cols) * blended.rows;
    const int fit = static_cast<int>(std::sqrt(kMaxPixels / area));
    const int factor = std::max(1, std::min((kMinBarWidth + blended.cols - 1) / blended.cols, fit));
    cv::resize(blended, blended, blended.size() * factor, 0, 0, cv::INTER_NEAREST);
    if (blended.cols < kMinBarWidth) {
      cv::copyMakeBorder(blended, blended, 0, 0, 0, kMinBarWidth - blended.cols,
                         cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
    }
    cv::vconcat(blended, ColourBar(blended.cols, scale, range), picture);
    std::vector<uchar> png;
    if (!cv::imencode(".png", picture, png)) return absl::InternalError("PNG encoding failed");
    return std::string(png.begin(), png.end());
  } catch (const cv::Exception& e) {
    return absl::InvalidArgumentError(std::string("heatmap failed: ") + e.what());
  }
}

}  // namespace gatescope
