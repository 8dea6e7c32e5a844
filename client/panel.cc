#include "client/panel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace gatescope::client {
namespace {

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
constexpr double kFontScale = 0.35;
constexpr int kMargin = 2;

int TextWidth(const std::string& text) {
  int baseline = 0;
  return cv::getTextSize(text, kFont, kFontScale, 1, &baseline).width;
}

// `text` on one line if it fits in `width` pixels at kFontScale; else on two, split after
// its first ": " if it has one ("model: label"), else at the spaces, filling line one first.
std::vector<std::string> WrapCaption(const std::string& text, int width) {
  if (TextWidth(text) <= width) return {text};
  const size_t colon = text.find(": ");
  if (colon != std::string::npos) return {text.substr(0, colon + 1), text.substr(colon + 2)};
  std::istringstream words(text);
  std::vector<std::string> lines;
  for (std::string word; words >> word;) {
    if (lines.empty()) {
      lines.push_back(word);
    } else if (lines.size() == 2 || TextWidth(lines.back() + " " + word) <= width) {
      lines.back() += " " + word;
    } else {
      lines.push_back(word);
    }
  }
  return lines;
}

void DrawCaption(cv::Mat& strip, const std::string& text) {
  const int width = strip.cols - 2 * kMargin;
  const std::vector<std::string> lines = WrapCaption(text, width);
  const int line_height = kCaptionHeight / 2;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int w = TextWidth(lines[i]);
    const double scale = w > width ? kFontScale * width / w : kFontScale;
    const int y = static_cast<int>(i + 1) * line_height - 4;
    cv::putText(strip, lines[i], cv::Point(kMargin, y), kFont, scale, cv::Scalar(255, 255, 255),
                1, cv::LINE_AA);
  }
}

}  // namespace

cv::Mat DecodeBgr(std::string_view bytes) {
  if (bytes.empty()) return {};
  const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
  return cv::imdecode(raw, cv::IMREAD_COLOR);
}

cv::Size TileSize(cv::Size input, int min_height, int max_height) {
  if (input.width <= 0 || input.height <= 0) return {};
  const int h = std::clamp(input.height, min_height, std::max(min_height, max_height));
  const int w = std::max(1, static_cast<int>(std::lround(
                                static_cast<double>(input.width) * h / input.height)));
  return {w, h};
}

cv::Mat HeadMean(const float* data, int heads, int rows, int cols) {
  if (heads <= 0 || rows <= 0 || cols <= 0) return {};
  cv::Mat mean(rows, cols, CV_32FC1, cv::Scalar(0));
  const size_t plane = static_cast<size_t>(rows) * cols;
  float* out = mean.ptr<float>();
  for (int h = 0; h < heads; ++h) {
    for (size_t i = 0; i < plane; ++i) out[i] += data[h * plane + i];
  }
  mean /= static_cast<double>(heads);
  return mean;
}

cv::Mat InputTile(const cv::Mat& image, cv::Size tile) {
  cv::Mat bgr = image, out;
  if (image.channels() == 1) cv::cvtColor(image, bgr, cv::COLOR_GRAY2BGR);
  const bool enlarge = tile.area() >= image.size().area();
  cv::resize(bgr, out, tile, 0, 0, enlarge ? cv::INTER_NEAREST : cv::INTER_AREA);
  return out;
}

cv::Mat OverlayTile(const cv::Mat& image, const cv::Mat& map, cv::Size tile) {
  if (map.empty() || map.type() != CV_32FC1) return {};
  cv::Mat m = map.clone();
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (auto it = m.begin<float>(); it != m.end<float>(); ++it) {
    if (std::isfinite(*it)) {
      lo = std::min(lo, *it);
      hi = std::max(hi, *it);
    }
  }
  for (auto it = m.begin<float>(); it != m.end<float>(); ++it) {
    const float v = std::isfinite(*it) ? *it : lo;
    *it = hi > lo ? (v - lo) / (hi - lo) : 0.f;
  }
  cv::Mat bytes, resized, colored, blended;
  m.convertTo(bytes, CV_8UC1, 255.0);
  cv::resize(bytes, resized, tile, 0, 0, cv::INTER_LINEAR);
  cv::applyColorMap(resized, colored, cv::COLORMAP_JET);
  cv::addWeighted(InputTile(image, tile), 0.5, colored, 0.5, 0.0, blended);
  return blended;
}

cv::Mat ComposePanel(const std::vector<cv::Mat>& tiles, const std::vector<std::string>& captions) {
  if (tiles.empty() || captions.size() != tiles.size()) return {};
  const cv::Size tile = tiles[0].size();
  for (const cv::Mat& t : tiles) {
    if (t.size() != tile || t.type() != CV_8UC3) return {};
  }
  cv::Mat panel(tile.height + kCaptionHeight, tile.width * static_cast<int>(tiles.size()),
                CV_8UC3, cv::Scalar(0, 0, 0));
  for (size_t i = 0; i < tiles.size(); ++i) {
    const int x = static_cast<int>(i) * tile.width;
    tiles[i].copyTo(panel(cv::Rect(x, 0, tile.width, tile.height)));
    cv::Mat strip = panel(cv::Rect(x, tile.height, tile.width, kCaptionHeight));
    DrawCaption(strip, captions[i]);
  }
  return panel;
}

}  // namespace gatescope::client
