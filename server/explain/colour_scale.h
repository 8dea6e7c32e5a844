// Colour scales of explanation maps that can be read as values: every rendered map comes
// with the scale it was drawn on, and the scale never exaggerates.
//   - A non-negative map is drawn on a sequential, perceptually uniform map (viridis) from
//     zero to its maximum: equal steps in value are equal steps in lightness, and a
//     near-uniform map looks near-uniform instead of being stretched to full contrast.
//   - A map with negative values is drawn on a diverging map (blue - grey - red) symmetric
//     about zero, so that zero is always the neutral grey.
// Pure OpenCV; every function is thread-safe (no shared state). Used by the server's
// heatmap PNGs and by gatescope-client's panels, so both draw the same scales.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace gatescope {

// The finite value range of one map and how many values were not finite.
struct MapRange {
  float min = 0.f;
  float max = 0.f;
  int64_t finite = 0;      // finite values seen
  int64_t non_finite = 0;  // NaN or infinite values (drawn grey, never scaled)

  // Spread of the values relative to their magnitude is under 2 %: the map is flat to
  // the eye on any honest scale, and the caption says so rather than the colours.
  bool NearFlat() const;
};

// The range of a CV_32FC1 map (empty or other types: no finite values).
MapRange RangeOf(const cv::Mat& map);

// The union of ranges (for a scale shared by several maps).
MapRange Union(const std::vector<MapRange>& ranges);

// The scale a map or a group of maps is drawn on.
struct ColourScale {
  bool diverging = false;  // true: [-limit, +limit] about zero; false: [0, limit]
  float limit = 1.f;       // > 0

  // The sequential [0, max] scale for a range without negative values, else the
  // diverging one with limit max(|min|, |max|); a limit of 0 becomes 1.
  static ColourScale For(const MapRange& range);

  float low() const { return diverging ? -limit : 0.f; }
};

// `map` (CV_32FC1) coloured on `scale` as CV_8UC3 BGR: values outside the scale are
// clipped to its ends (a shared scale may be narrower than a map only if the caller chose
// so), non-finite values are mid grey. Empty if `map` is empty or not CV_32FC1.
cv::Mat Colourize(const cv::Mat& map, const ColourScale& scale);

// `map` (CV_32FC1) resized bilinearly to `size`, its non-finite cells resized by nearest
// neighbour (so they keep their own extent instead of spreading into their neighbours).
// Empty if `map` is empty or not CV_32FC1.
cv::Mat ResizeMap(const cv::Mat& map, cv::Size size);

// The 256 BGR colours of the scale's map, low to high (for legends and the browser viewer).
std::vector<cv::Vec3b> ScaleColours(bool diverging);

// Height of ColourBar's strip.
constexpr int kColourBarHeight = 24;

// A strip `width` pixels wide (CV_8UC3, kColourBarHeight high): the scale's colours left to
// right with its end values (and 0 for a diverging scale) printed under it, and the
// `data` range marked by two white ticks on the bar, so that a map drawn on a shared
// scale shows where its own values lie.
cv::Mat ColourBar(int width, const ColourScale& scale, const MapRange& data);

// "min..max" of the finite values with 3 significant digits, plus " (flat)" when
// NearFlat and ", N non-finite" when there are any; "no finite values" if none.
std::string RangeText(const MapRange& range);

// `value` with 3 significant digits, compactly ("0.5", "-0.196", "4.3e-04").
std::string ShortNumber(float value);

}  // namespace gatescope
