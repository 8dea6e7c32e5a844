#include "server/explain/colour_scale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <opencv2/imgproc.hpp>

namespace gatescope {
namespace {

constexpr double kNearFlatSpread = 0.02;
const cv::Vec3b kNonFiniteGrey(128, 128, 128);

// OpenCV's own viridis, read off a 0..255 ramp (so no table is typed in here).
std::vector<cv::Vec3b> Viridis() {
  cv::Mat ramp(1, 256, CV_8UC1), colours;
  for (int i = 0; i < 256; ++i) ramp.at<uchar>(0, i) = static_cast<uchar>(i);
  cv::applyColorMap(ramp, colours, cv::COLORMAP_VIRIDIS);
  return {colours.begin<cv::Vec3b>(), colours.end<cv::Vec3b>()};
}

// A blue - light grey - red map (the end and centre colours of the common "cool to warm"
// diverging scale), linear in RGB on each half: symmetric lightness about a neutral zero.
std::vector<cv::Vec3b> CoolWarm() {
  const cv::Vec3d cool(192, 76, 59), neutral(221, 221, 221), warm(38, 4, 180);  // BGR
  std::vector<cv::Vec3b> out(256);
  for (int i = 0; i < 256; ++i) {
    const double t = i / 255.0;
    const cv::Vec3d c = t < 0.5 ? cool + (neutral - cool) * (t / 0.5)
                                : neutral + (warm - neutral) * ((t - 0.5) / 0.5);
    out[i] = cv::Vec3b(static_cast<uchar>(std::lround(c[0])), static_cast<uchar>(std::lround(c[1])),
                       static_cast<uchar>(std::lround(c[2])));
  }
  return out;
}

const std::vector<cv::Vec3b>& Table(bool diverging) {
  static const auto* viridis = new std::vector<cv::Vec3b>(Viridis());
  static const auto* cool_warm = new std::vector<cv::Vec3b>(CoolWarm());
  return diverging ? *cool_warm : *viridis;
}

// The table index of `v` on `scale`, clipped to the ends.
int IndexOf(float v, const ColourScale& scale) {
  const double t = (static_cast<double>(v) - scale.low()) / (scale.limit - scale.low());
  return std::clamp(static_cast<int>(std::lround(t * 255.0)), 0, 255);
}

void PutText(cv::Mat& strip, const std::string& text, int x, int y, int align) {
  int baseline = 0;
  const double font_scale = 0.32;
  const int w = cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, font_scale, 1, &baseline).width;
  int left = align < 0 ? x : align == 0 ? x - w / 2 : x - w;
  left = std::clamp(left, 0, std::max(0, strip.cols - w));
  cv::putText(strip, text, cv::Point(left, y), cv::FONT_HERSHEY_SIMPLEX, font_scale,
              cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
}

}  // namespace

bool MapRange::NearFlat() const {
  if (finite == 0) return false;
  const double magnitude = std::max(std::fabs(min), std::fabs(max));
  return magnitude == 0.0 || (max - min) <= kNearFlatSpread * magnitude;
}

MapRange RangeOf(const cv::Mat& map) {
  MapRange r;
  if (map.empty() || map.type() != CV_32FC1) return r;
  for (auto it = map.begin<float>(); it != map.end<float>(); ++it) {
    if (!std::isfinite(*it)) {
      ++r.non_finite;
      continue;
    }
    r.min = r.finite ? std::min(r.min, *it) : *it;
    r.max = r.finite ? std::max(r.max, *it) : *it;
    ++r.finite;
  }
  return r;
}

MapRange Union(const std::vector<MapRange>& ranges) {
  MapRange u;
  for (const MapRange& r : ranges) {
    if (r.finite > 0) {
      u.min = u.finite ? std::min(u.min, r.min) : r.min;
      u.max = u.finite ? std::max(u.max, r.max) : r.max;
      u.finite += r.finite;
    }
    u.non_finite += r.non_finite;
  }
  return u;
}

ColourScale ColourScale::For(const MapRange& range) {
  ColourScale s;
  s.diverging = range.finite > 0 && range.min < 0.f;
  const float limit =
      s.diverging ? std::max(std::fabs(range.min), std::fabs(range.max)) : std::max(range.max, 0.f);
  s.limit = limit > 0.f && std::isfinite(limit) ? limit : 1.f;
  return s;
}

cv::Mat Colourize(const cv::Mat& map, const ColourScale& scale) {
  if (map.empty() || map.type() != CV_32FC1) return {};
  const std::vector<cv::Vec3b>& table = Table(scale.diverging);
  cv::Mat out(map.size(), CV_8UC3);
  for (int y = 0; y < map.rows; ++y) {
    const float* in = map.ptr<float>(y);
    cv::Vec3b* row = out.ptr<cv::Vec3b>(y);
    for (int x = 0; x < map.cols; ++x) {
      row[x] = std::isfinite(in[x]) ? table[IndexOf(in[x], scale)] : kNonFiniteGrey;
    }
  }
  return out;
}

std::vector<cv::Vec3b> ScaleColours(bool diverging) { return Table(diverging); }

cv::Mat ResizeMap(const cv::Mat& map, cv::Size size) {
  if (map.empty() || map.type() != CV_32FC1) return {};
  const MapRange range = RangeOf(map);
  cv::Mat finite = map.clone(), bad(map.size(), CV_8UC1, cv::Scalar(0));
  for (int y = 0; y < map.rows; ++y) {
    for (int x = 0; x < map.cols; ++x) {
      if (!std::isfinite(map.at<float>(y, x))) {
        finite.at<float>(y, x) = range.min;
        bad.at<uchar>(y, x) = 1;
      }
    }
  }
  cv::Mat out, bad_out;
  cv::resize(finite, out, size, 0, 0, cv::INTER_LINEAR);
  if (range.non_finite == 0) return out;
  cv::resize(bad, bad_out, size, 0, 0, cv::INTER_NEAREST);
  out.setTo(std::numeric_limits<float>::quiet_NaN(), bad_out);
  return out;
}

cv::Mat ColourBar(int width, const ColourScale& scale, const MapRange& data) {
  width = std::max(width, 8);
  cv::Mat strip(kColourBarHeight, width, CV_8UC3, cv::Scalar(0, 0, 0));
  const std::vector<cv::Vec3b>& table = Table(scale.diverging);
  const int margin = 3, bar_top = 2, bar_height = 9;
  const int bar_width = width - 2 * margin;
  for (int x = 0; x < bar_width; ++x) {
    const int i = bar_width > 1 ? x * 255 / (bar_width - 1) : 0;
    cv::line(strip, cv::Point(margin + x, bar_top), cv::Point(margin + x, bar_top + bar_height - 1),
             cv::Scalar(table[i]));
  }
  auto x_of = [&](float v) {
    return margin + IndexOf(v, scale) * std::max(bar_width - 1, 0) / 255;
  };
  if (data.finite > 0) {
    for (float v : {data.min, data.max}) {
      const int x = x_of(v);
      cv::line(strip, cv::Point(x, bar_top - 2), cv::Point(x, bar_top + bar_height + 1),
               cv::Scalar(0, 0, 0), 3);
      cv::line(strip, cv::Point(x, bar_top - 2), cv::Point(x, bar_top + bar_height + 1),
               cv::Scalar(255, 255, 255), 1);
    }
  }
  const int text_y = kColourBarHeight - 3;
  PutText(strip, ShortNumber(scale.low()), margin, text_y, -1);
  if (scale.diverging) PutText(strip, "0", width / 2, text_y, 0);
  PutText(strip, ShortNumber(scale.limit), width - margin, text_y, 1);
  return strip;
}

std::string ShortNumber(float value) {
  char buffer[32];
  const double a = std::fabs(value);
  if (value == 0.f) return "0";
  if (a >= 1e-2 && a < 1e4) {
    std::snprintf(buffer, sizeof(buffer), "%.3g", value);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.1e", value);
  }
  return buffer;
}

std::string RangeText(const MapRange& range) {
  if (range.finite == 0) return "no finite values";
  std::string text = ShortNumber(range.min) + ".." + ShortNumber(range.max);
  if (range.NearFlat()) text += " (flat)";
  if (range.non_finite > 0) text += ", " + std::to_string(range.non_finite) + " non-finite";
  return text;
}

}  // namespace gatescope
