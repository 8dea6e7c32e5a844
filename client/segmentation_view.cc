#include "client/segmentation_view.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <opencv2/imgproc.hpp>

namespace gatescope::client {
namespace {

// BGR; index 0 is the background.
const cv::Vec3b kPalette[] = {{0, 0, 0},       {60, 20, 220},  {75, 180, 60},   {25, 225, 255},
                              {200, 130, 0},   {48, 130, 245}, {180, 30, 145},  {240, 240, 70},
                              {230, 50, 240},  {60, 245, 210}, {212, 190, 250}, {128, 128, 0},
                              {255, 190, 220}, {40, 110, 170}, {200, 250, 255}, {0, 0, 128},
                              {195, 255, 170}, {0, 128, 128},  {180, 215, 255}, {128, 0, 0}};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

}  // namespace

cv::Vec3b ClassColor(int index) {
  if (index <= 0) return kPalette[0];
  if (index < kPaletteSize) return kPalette[index];
  const cv::Vec3b c = kPalette[1 + (index - 1) % (kPaletteSize - 1)];
  return {static_cast<uchar>(c[0] * 2 / 3), static_cast<uchar>(c[1] * 2 / 3),
          static_cast<uchar>(c[2] * 2 / 3)};
}

cv::Mat MaskOverlay(const cv::Mat& image, const cv::Mat& mask, double alpha) {
  if (mask.empty() || mask.type() != CV_8UC1) return {};
  cv::Mat colours(mask.size(), CV_8UC3);
  for (int y = 0; y < mask.rows; ++y) {
    for (int x = 0; x < mask.cols; ++x)
      colours.at<cv::Vec3b>(y, x) = ClassColor(mask.at<uchar>(y, x));
  }
  if (image.empty()) return colours;
  cv::Mat bgr = image, out;
  if (image.channels() == 1) cv::cvtColor(image, bgr, cv::COLOR_GRAY2BGR);
  if (bgr.size() != mask.size()) {
    const bool shrink = bgr.size().area() > mask.size().area();
    cv::resize(bgr, bgr, mask.size(), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  }
  cv::addWeighted(bgr, 1.0 - alpha, colours, alpha, 0.0, out);
  return out;
}

cv::Mat Legend(const std::vector<std::string>& labels, const std::vector<int64_t>& pixels,
               int width) {
  const int rows = static_cast<int>(labels.size());
  int64_t total = 0;
  for (int64_t n : pixels) total += n;
  std::vector<std::string> texts;
  for (int i = 0; i < rows; ++i) {
    const int64_t n = i < static_cast<int>(pixels.size()) ? pixels[i] : 0;
    char percent[32];
    std::snprintf(percent, sizeof(percent), "%.1f", total > 0 ? 100.0 * n / total : 0.0);
    texts.push_back(labels[i] + ": " + std::to_string(n) + " px (" + percent + "%)");
    int baseline = 0;
    const cv::Size size = cv::getTextSize(texts.back(), cv::FONT_HERSHEY_SIMPLEX, 0.35, 1,
                                          &baseline);
    width = std::max(width, kLegendRowHeight + 6 + size.width);  // never cut a line off
  }
  cv::Mat strip(std::max(1, rows * kLegendRowHeight), std::max(1, width), CV_8UC3,
                cv::Scalar(0, 0, 0));
  for (int i = 0; i < rows; ++i) {
    const int top = i * kLegendRowHeight;
    const cv::Rect swatch(2, top + 2, kLegendRowHeight - 4, kLegendRowHeight - 4);
    cv::rectangle(strip, swatch, cv::Scalar(ClassColor(i)), cv::FILLED);
    cv::rectangle(strip, swatch, cv::Scalar(200, 200, 200), 1);
    cv::putText(strip, texts[i], cv::Point(kLegendRowHeight + 2, top + kLegendRowHeight - 4),
                cv::FONT_HERSHEY_SIMPLEX, 0.35, cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
  }
  return strip;
}

cv::Mat SegmentationPicture(const cv::Mat& image, const cv::Mat& mask,
                            const std::vector<std::string>& labels,
                            const std::vector<int64_t>& pixels) {
  const cv::Mat overlay = MaskOverlay(image, mask);
  if (overlay.empty()) return {};
  const cv::Mat legend = Legend(labels, pixels, overlay.cols);
  cv::Mat top = overlay;
  if (legend.cols > overlay.cols) {  // a narrow image: pad it to the legend's width
    cv::copyMakeBorder(overlay, top, 0, 0, 0, legend.cols - overlay.cols, cv::BORDER_CONSTANT,
                       cv::Scalar(0, 0, 0));
  }
  cv::Mat out;
  cv::vconcat(top, legend, out);
  return out;
}

void MarkPixel(cv::Mat& tile, cv::Size input, int y, int x) {
  if (tile.empty() || input.width <= 0 || input.height <= 0) return;
  const cv::Point at(static_cast<int>((x + 0.5) * tile.cols / input.width),
                     static_cast<int>((y + 0.5) * tile.rows / input.height));
  const int r = std::max(4, std::min(tile.rows, tile.cols) / 30);
  for (const auto& [colour, thickness] :
       {std::pair{cv::Scalar(0, 0, 0), 3}, std::pair{cv::Scalar(255, 255, 255), 1}}) {
    cv::circle(tile, at, r, colour, thickness, cv::LINE_AA);
    cv::line(tile, at - cv::Point(2 * r, 0), at - cv::Point(r, 0), colour, thickness);
    cv::line(tile, at + cv::Point(r, 0), at + cv::Point(2 * r, 0), colour, thickness);
    cv::line(tile, at - cv::Point(0, 2 * r), at - cv::Point(0, r), colour, thickness);
    cv::line(tile, at + cv::Point(0, r), at + cv::Point(0, 2 * r), colour, thickness);
  }
}

}  // namespace gatescope::client
