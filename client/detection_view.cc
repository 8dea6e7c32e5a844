#include "client/detection_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include <opencv2/imgproc.hpp>

#include "client/segmentation_view.h"
#include "server/explain/colour_scale.h"

namespace gatescope::client {

using ::gatescope::ColourScale;
using ::gatescope::Colourize;
using ::gatescope::RangeOf;

int DetectionScale(cv::Size input, int min_height) {
  if (input.height <= 0) return 1;
  return std::max(1, (min_height + input.height - 1) / input.height);
}

namespace {

constexpr double kLabelFont = 0.45;

cv::Scalar ColourOf(int label) {
  const cv::Vec3b c = ClassColor(label + 1);
  return {static_cast<double>(c[0]), static_cast<double>(c[1]), static_cast<double>(c[2])};
}

// Black on light colours, white on dark ones (by Rec. 601 luma).
cv::Scalar TextColourOn(const cv::Scalar& bgr) {
  const double luma = 0.114 * bgr[0] + 0.587 * bgr[1] + 0.299 * bgr[2];
  return luma > 110 ? cv::Scalar(0, 0, 0) : cv::Scalar(255, 255, 255);
}

void DashedRectangle(cv::Mat& canvas, cv::Point p1, cv::Point p2) {
  const cv::Point corners[] = {p1, {p2.x, p1.y}, p2, {p1.x, p2.y}};
  for (int side = 0; side < 4; ++side) {
    const cv::Point a = corners[side], b = corners[(side + 1) % 4];
    const double length = cv::norm(b - a);
    for (double t = 0; t < length; t += 8) {
      const double u = std::min(length, t + 4);
      cv::line(canvas, a + (b - a) * (t / length), a + (b - a) * (u / length),
               cv::Scalar(255, 255, 255), 2);
    }
  }
}

// Where each caption goes: the first candidate place (above the box, inside its top, below
// it, then further above and below in caption-high steps) inside the canvas that overlaps
// no caption placed before it; the first place inside the canvas if every one overlaps.
std::vector<cv::Rect> PlaceCaptions(const std::vector<cv::Rect>& boxes,
                                    const std::vector<cv::Size>& texts, cv::Size canvas) {
  std::vector<cv::Rect> placed;
  const cv::Rect inside(0, 0, canvas.width, canvas.height);
  for (size_t i = 0; i < boxes.size(); ++i) {
    const cv::Rect& b = boxes[i];
    const cv::Size size(texts[i].width + 4, texts[i].height + 6);
    std::vector<cv::Point> candidates = {{b.x, b.y - size.height},
                                         {b.x + 2, b.y + 2},
                                         {b.x, b.y + b.height + 1}};
    for (int k = 1; k <= 8; ++k) {
      candidates.push_back({b.x, b.y - size.height * (k + 1)});
      candidates.push_back({b.x, b.y + b.height + 1 + size.height * k});
    }
    std::optional<cv::Rect> chosen, fallback;
    for (cv::Point at : candidates) {
      at.x = std::clamp(at.x, 0, std::max(0, canvas.width - size.width));
      const cv::Rect r(at, size);
      if ((r & inside) != r) continue;
      if (!fallback) fallback = r;
      const bool free = std::none_of(placed.begin(), placed.end(),
                                     [&](const cv::Rect& p) { return (p & r).area() > 0; });
      if (free) {
        chosen = r;
        break;
      }
    }
    placed.push_back(chosen ? *chosen : fallback ? *fallback : cv::Rect(cv::Point(0, 0), size));
  }
  return placed;
}

void DrawTextStrip(cv::Mat& strip, const std::string& text) {
  int baseline = 0;
  const cv::Size size = cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, 0.4, 1, &baseline);
  const double scale = size.width > strip.cols - 4 ? 0.4 * (strip.cols - 4) / size.width : 0.4;
  cv::putText(strip, text, cv::Point(2, strip.rows - 5), cv::FONT_HERSHEY_SIMPLEX, scale,
              cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
}

}  // namespace

int PointsOutside(const std::vector<DrawnPoints>& points, cv::Size size) {
  int outside = 0;
  for (const DrawnPoints& p : points) {
    for (const cv::Point2f& q : p.points) {
      outside += !(q.x >= 0 && q.y >= 0 && q.x < size.width && q.y < size.height);
    }
  }
  return outside;
}

cv::Mat DetectionPicture(const cv::Mat& image, const DetectionDrawing& d) {
  if (image.empty()) return {};
  cv::Mat bgr;
  if (image.channels() == 1) {
    cv::cvtColor(image, bgr, cv::COLOR_GRAY2BGR);
  } else {
    bgr = image;
  }
  const int scale = DetectionScale(bgr.size());
  cv::Mat enlarged;
  cv::resize(bgr, enlarged, bgr.size() * scale, 0, 0, cv::INTER_NEAREST);
  size_t total_points = 0;
  for (const DrawnPoints& p : d.points) total_points += p.points.size();
  const int mx = total_points ? enlarged.cols / 4 : 0, my = total_points ? enlarged.rows / 4 : 0;
  cv::Mat out(enlarged.rows + 2 * my, enlarged.cols + 2 * mx, CV_8UC3, cv::Scalar(40, 40, 40));
  enlarged.copyTo(out(cv::Rect(mx, my, enlarged.cols, enlarged.rows)));
  const float s = static_cast<float>(scale);
  // Input pixels to the canvas, pinned inside it (in double, before any integer
  // conversion can overflow); a non-finite coordinate lands on the canvas's first row or
  // column (such points are counted as outside the image).
  auto pin = [](double v, int hi) {
    return std::isfinite(v) ? static_cast<int>(std::lround(std::clamp(v, 0.0, double(hi)))) : 0;
  };
  auto at = [&](float x, float y) {
    return cv::Point(pin(double(x) * s + mx, out.cols - 1), pin(double(y) * s + my, out.rows - 1));
  };
  if (d.density && total_points) {
    cv::Mat density(out.size(), CV_32FC1, cv::Scalar(0));
    for (const DrawnPoints& p : d.points) {
      for (size_t i = 0; i < p.points.size() && i < p.weights.size(); ++i) {
        density.at<float>(at(p.points[i].x, p.points[i].y)) += std::max(p.weights[i], 0.f);
      }
    }
    cv::GaussianBlur(density, density, cv::Size(), 2.0 * s);
    const ColourScale scale = ColourScale::For(RangeOf(density));
    const cv::Mat colours = Colourize(density, scale);
    // Opacity follows the density, so that the picture stays visible where no point falls.
    for (int y = 0; y < out.rows; ++y) {
      for (int x = 0; x < out.cols; ++x) {
        const float a = 0.75f * std::clamp(density.at<float>(y, x) / scale.limit, 0.f, 1.f);
        cv::Vec3b& px = out.at<cv::Vec3b>(y, x);
        const cv::Vec3b& c = colours.at<cv::Vec3b>(y, x);
        for (int k = 0; k < 3; ++k) px[k] = cv::saturate_cast<uchar>(px[k] * (1 - a) + c[k] * a);
      }
    }
  }
  if (total_points) {
    cv::rectangle(out, cv::Rect(mx - 1, my - 1, enlarged.cols + 2, enlarged.rows + 2),
                  cv::Scalar(160, 160, 160), 1);
  }
  for (const DrawnBox& t : d.truth) DashedRectangle(out, at(t.x1, t.y1), at(t.x2, t.y2) - cv::Point(1, 1));
  // Last first, so that the first (highest-scoring) detection ends on top.
  for (auto it = d.points.rbegin(); it != d.points.rend(); ++it) {
    const DrawnPoints& p = *it;
    float top = 0.f;
    for (float w : p.weights) top = std::max(top, w);
    for (size_t i = 0; i < p.points.size() && i < p.weights.size(); ++i) {
      const float rel = top > 0.f ? p.weights[i] / top : 0.f;
      const int radius = 1 + static_cast<int>(std::lround(5.f * std::sqrt(rel)));
      const cv::Point centre = at(p.points[i].x, p.points[i].y);
      cv::circle(out, centre, radius, ColourOf(p.label), cv::FILLED, cv::LINE_AA);
      cv::circle(out, centre, radius, cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
    }
  }
  std::vector<cv::Rect> rects;
  std::vector<cv::Size> texts;
  for (const DrawnBox& b : d.boxes) {
    const cv::Point p1 = at(b.x1, b.y1), p2 = at(b.x2, b.y2) - cv::Point(1, 1);
    rects.emplace_back(p1, p2);
    int baseline = 0;
    texts.push_back(cv::getTextSize(b.caption, cv::FONT_HERSHEY_SIMPLEX, kLabelFont, 1, &baseline));
  }
  for (size_t i = d.boxes.size(); i-- > 0;) {
    cv::rectangle(out, rects[i], ColourOf(d.boxes[i].label), 2);
  }
  const std::vector<cv::Rect> captions = PlaceCaptions(rects, texts, out.size());
  for (size_t i = d.boxes.size(); i-- > 0;) {
    const cv::Rect& c = captions[i];
    cv::rectangle(out, c, ColourOf(d.boxes[i].label), cv::FILLED);
    cv::rectangle(out, c, cv::Scalar(0, 0, 0), 1);
    cv::putText(out, d.boxes[i].caption, cv::Point(c.x + 2, c.y + c.height - 4),
                cv::FONT_HERSHEY_SIMPLEX, kLabelFont, TextColourOn(ColourOf(d.boxes[i].label)), 1,
                cv::LINE_AA);
  }
  std::vector<cv::Mat> rows;
  if (!d.title.empty()) {
    rows.push_back(cv::Mat(20, out.cols, CV_8UC3, cv::Scalar(0, 0, 0)));
    DrawTextStrip(rows.back(), d.title);
  }
  rows.push_back(out);
  if (total_points) {
    const int outside = PointsOutside(d.points, bgr.size());
    char text[160];
    std::snprintf(text, sizeof(text),
                  "%d of %zu sampling points (%.0f%%) outside the image (grey margin)", outside,
                  total_points, 100.0 * outside / total_points);
    rows.push_back(cv::Mat(20, out.cols, CV_8UC3, cv::Scalar(0, 0, 0)));
    DrawTextStrip(rows.back(), text);
  }
  cv::Mat picture;
  cv::vconcat(rows, picture);
  return picture;
}

}  // namespace gatescope::client
