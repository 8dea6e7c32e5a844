#include "client/panel.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "client/segmentation_view.h"

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

// `text` on one line at baseline `y`, shrunk to fit the strip's width.
void DrawLine(cv::Mat& strip, const std::string& text, int y) {
  const int width = strip.cols - 2 * kMargin;
  const int w = TextWidth(text);
  const double scale = w > width ? kFontScale * width / w : kFontScale;
  cv::putText(strip, text, cv::Point(kMargin, y), kFont, scale, cv::Scalar(255, 255, 255), 1,
              cv::LINE_AA);
}

// The tile's name on line one and its value range on line two; a name too long for one
// line takes both when there is no range.
void DrawCaption(cv::Mat& strip, const std::string& text, const std::string& range) {
  const int line_height = kCaptionHeight / 2;
  std::vector<std::string> lines = WrapCaption(text, strip.cols - 2 * kMargin);
  if (!range.empty()) {
    std::string first;
    for (const std::string& l : lines) first += (first.empty() ? "" : " ") + l;
    lines = {first, range};
  }
  for (size_t i = 0; i < lines.size() && i < 2; ++i) {
    DrawLine(strip, lines[i], static_cast<int>(i + 1) * line_height - 4);
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

void MapPanel::AddInput(std::string caption) {
  tiles_.push_back({InputTile(image_, tile_), {}, std::move(caption), ""});
}

void MapPanel::AddMap(cv::Mat map, std::string caption, std::string group) {
  tiles_.push_back({{}, std::move(map), std::move(caption), std::move(group)});
}

void MapPanel::AddPicture(cv::Mat picture, std::string caption) {
  cv::Mat tile;
  if (!picture.empty()) {
    cv::resize(picture, tile, tile_, 0, 0,
               tile_.area() >= picture.size().area() ? cv::INTER_NEAREST : cv::INTER_AREA);
  }
  tiles_.push_back({std::move(tile), {}, std::move(caption), ""});
}

std::optional<ColourScale> MapPanel::SharedScale(const std::string& group) const {
  if (mode_ != ScaleMode::kShared) return std::nullopt;
  std::vector<MapRange> ranges;
  for (const Tile& t : tiles_) {
    if (!t.map.empty() && t.group == group) ranges.push_back(RangeOf(t.map));
  }
  for (const auto& [g, range] : extra_ranges_) {
    if (g == group) ranges.push_back(range);
  }
  if (ranges.empty()) return std::nullopt;
  return ColourScale::For(Union(ranges));
}

cv::Mat MapPanel::RenderMap(const Tile& tile, const ColourScale& scale) const {
  if (tile.map.type() != CV_32FC1) return {};
  cv::Mat resized, grey, grey_bgr, out;
  resized = ResizeMap(tile.map, tile_);
  const cv::Mat colours = Colourize(resized, scale);
  // The input shows through in grey only, so that every colour is the map's own.
  cv::cvtColor(InputTile(image_, tile_), grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(grey, grey_bgr, cv::COLOR_GRAY2BGR);
  cv::addWeighted(grey_bgr, 0.3, colours, 0.7, 0.0, out);
  return out;
}

cv::Mat MapPanel::Render(const std::string& title) const {
  if (tiles_.empty() || tile_.width <= 0 || tile_.height <= 0) return {};
  const int strip = kColourBarHeight + kCaptionHeight;
  const int width = tile_.width * static_cast<int>(tiles_.size());
  cv::Mat panel(kTitleHeight + tile_.height + strip, width, CV_8UC3, cv::Scalar(0, 0, 0));
  cv::Mat title_strip = panel(cv::Rect(0, 0, width, kTitleHeight));
  DrawLine(title_strip, title, kTitleHeight - 5);
  for (size_t i = 0; i < tiles_.size(); ++i) {
    const Tile& t = tiles_[i];
    const int x = static_cast<int>(i) * tile_.width;
    cv::Mat picture = t.picture;
    std::string range_text;
    if (!t.map.empty()) {
      const MapRange range = RangeOf(t.map);
      const std::optional<ColourScale> shared = SharedScale(t.group);
      const ColourScale scale = shared ? *shared : ColourScale::For(range);
      picture = RenderMap(t, scale);
      ColourBar(tile_.width, scale, range)
          .copyTo(panel(cv::Rect(x, kTitleHeight + tile_.height, tile_.width, kColourBarHeight)));
      range_text = RangeText(range);
    }
    if (picture.empty()) picture = cv::Mat(tile_, CV_8UC3, cv::Scalar(48, 48, 48));
    if (mark_) MarkPixel(picture, image_.size(), mark_->y, mark_->x);
    picture.copyTo(panel(cv::Rect(x, kTitleHeight, tile_.width, tile_.height)));
    cv::Mat caption = panel(cv::Rect(x, kTitleHeight + tile_.height + kColourBarHeight,
                                     tile_.width, kCaptionHeight));
    DrawCaption(caption, t.caption, range_text);
  }
  return panel;
}

}  // namespace gatescope::client
