#include "server/explain/heatmap.h"

#include <ATen/core/Tensor.h>

#include <opencv2/imgproc.hpp>
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/explain/colour_scale.h"
#include "server/postprocess/png_encode.h"
#include "server/preprocess/image_codec.h"

namespace gatescope {
namespace {

constexpr int kMinBarWidth = 160;
constexpr double kMaxPixels = 4e6;

// The input's grey pixels (the overlay's backdrop) by the server's own decoder, so the
// server needs no OpenCV image-file module (png_encode.h says why). Luma weights as
// OpenCV's.
absl::StatusOr<cv::Mat> DecodeGrey(std::string_view image_bytes) {
  auto refuse = [](const absl::Status& status) {
    return absl::InvalidArgumentError(
        absl::StrCat("heatmap input image cannot be decoded: ", status.message()));
  };
  const absl::StatusOr<ImageHeader> header = ReadImageHeader(image_bytes);
  if (!header.ok()) return refuse(header.status());
  absl::StatusOr<cv::Mat> grey =
      DecodeImagePixels(image_bytes, *header, DecodeRequest{/*gray=*/true, {}});
  if (!grey.ok()) return refuse(grey.status());
  return grey;
}

}  // namespace

absl::StatusOr<std::string> RenderOverlayPng(const at::Tensor& map,
                                             std::string_view image_bytes) {
  if (map.dim() != 2 || map.numel() == 0) {
    return absl::InvalidArgumentError("heatmap needs a non-empty [h, w] map");
  }
  absl::StatusOr<cv::Mat> grey = DecodeGrey(image_bytes);
  if (!grey.ok()) return grey.status();
  try {
    const at::Tensor m = map.to(at::kFloat).contiguous();
    const cv::Mat small(static_cast<int>(m.size(0)), static_cast<int>(m.size(1)), CV_32FC1,
                        m.data_ptr<float>());
    const MapRange range = RangeOf(small);
    const ColourScale scale = ColourScale::For(range);
    cv::Mat grey_bgr, blended, picture;
    const cv::Mat resized = ResizeMap(small, grey->size());
    cv::cvtColor(*grey, grey_bgr, cv::COLOR_GRAY2BGR);
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
    return EncodePng(picture);
  } catch (const cv::Exception& e) {
    return absl::InvalidArgumentError(std::string("heatmap failed: ") + e.what());
  }
}

}  // namespace gatescope
