// Explanation panels: the input image and maps over it side by side, each with its colour
// bar, value range and caption.
// Pure OpenCV (no gRPC); OpenCV may throw cv::Exception on allocation failures.
#pragma once

#include <string>
#include <string_view>
#include <optional>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>

#include "client/scale_mode.h"
#include "server/explain/colour_scale.h"

namespace gatescope::client {

using ::gatescope::ColourScale;
using ::gatescope::MapRange;

// Heights of the strips of a MapPanel: the title above, the caption (two lines: the
// tile's name and its value range) under every tile.
constexpr int kTitleHeight = 18;
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

// A picture of tiles left to right: the input, explanation maps drawn over it on honest
// colour scales (server/explain/colour_scale.h) each with its colour bar and value range,
// and ready-made tiles; a title strip above (model, prediction, scale). Maps are coloured
// only in Render, when the shared scale is known. Not thread-safe; cheap to build.
class MapPanel {
 public:
  // `image`: the input (8-bit BGR or grayscale); `tile`: every tile's size.
  MapPanel(cv::Mat image, cv::Size tile, ScaleMode mode)
      : image_(std::move(image)), tile_(tile), mode_(mode) {}

  // The input itself.
  void AddInput(std::string caption = "input");
  // `map` (CV_32FC1, any size and range) drawn over the input. Maps of one `group` (one
  // quantity: "rollout", "gate", ...) share a scale in kShared mode; different quantities
  // never do.
  void AddMap(cv::Mat map, std::string caption, std::string group = "");
  // A ready tile (CV_8UC3, resized to the tile size), e.g. a mask or an error tile.
  void AddPicture(cv::Mat picture, std::string caption);
  // Widens `group`'s shared scale to cover `range` too: maps of the same quantity drawn in
  // other panels (e.g. the rows of a comparison) then share one scale.
  void IncludeInScale(const std::string& group, const MapRange& range) {
    extra_ranges_.push_back({group, range});
  }
  // Marks the input pixel (y, x) with a cross-hair on every tile.
  void Mark(int y, int x) { mark_ = cv::Point(x, y); }

  // The shared scale of `group`'s maps added so far (kShared), or nullopt (kTile, or no
  // map in the group).
  std::optional<ColourScale> SharedScale(const std::string& group) const;

  // The picture; empty if there are no tiles or OpenCV fails.
  cv::Mat Render(const std::string& title) const;

  size_t size() const { return tiles_.size(); }

 private:
  struct Tile {
    cv::Mat picture;  // a ready tile, or empty
    cv::Mat map;      // a map to colour, or empty
    std::string caption;
    std::string group;  // the map's scale group
  };
  cv::Mat RenderMap(const Tile& tile, const ColourScale& scale) const;

  cv::Mat image_;
  cv::Size tile_;
  ScaleMode mode_;
  std::optional<cv::Point> mark_;
  std::vector<Tile> tiles_;
  std::vector<std::pair<std::string, MapRange>> extra_ranges_;
};

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
