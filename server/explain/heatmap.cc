#include "server/explain/heatmap.h"

#include <ATen/ATen.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

namespace gatescope {

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
    at::Tensor m = map.to(at::kFloat).contiguous();
    // Scale by the finite values only; non-finite ones are drawn as the minimum.
    const at::Tensor finite = at::isfinite(m);
    const at::Tensor values = m.masked_select(finite);
    const float lo = values.numel() ? values.min().item<float>() : 0.f;
    const float hi = values.numel() ? values.max().item<float>() : 0.f;
    m = at::where(finite, m, at::full_like(m, lo));
    m = hi > lo ? (m - lo) / (hi - lo) : at::zeros_like(m);
    at::Tensor bytes = (m * 255.0f).round().clamp(0, 255).to(at::kByte).contiguous();
    cv::Mat small(static_cast<int>(m.size(0)), static_cast<int>(m.size(1)), CV_8UC1,
                  bytes.data_ptr());
    cv::Mat resized, colored, blended;
    cv::resize(small, resized, image.size(), 0, 0, cv::INTER_CUBIC);
    cv::applyColorMap(resized, colored, cv::COLORMAP_JET);
    cv::addWeighted(image, 0.5, colored, 0.5, 0.0, blended);
    std::vector<uchar> png;
    if (!cv::imencode(".png", blended, png)) return absl::InternalError("PNG encoding failed");
    return std::string(png.begin(), png.end());
  } catch (const cv::Exception& e) {
    return absl::InvalidArgumentError(std::string("heatmap failed: ") + e.what());
  }
}

}  // namespace gatescope
