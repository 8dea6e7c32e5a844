#include "client/detection_view.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "client/segmentation_view.h"

namespace gatescope::client {

int DetectionScale(cv::Size input, int min_height) {
  if (input.height <= 0) return 1;
  return std::max(1, (min_height + input.height - 1) / input.height);
}

cv::Mat DetectionPicture(const cv::Mat& image, const std::vector<DrawnBox>& boxes,
                         const std::vector<DrawnPoints>& points) {
  if (image.empty()) return {};
  cv::Mat bgr;
  if (image.channels() == 1) {
    cv::cvtColor(image, bgr, cv::COLOR_GRAY2BGR);
  } else {
    bgr = image.clone();
  }
  const int scale = DetectionScale(bgr.size());
  cv::Mat out;
  cv::resize(bgr, out, bgr.size() * scale, 0, 0, cv::INTER_NEAREST);
  const float s = static_cast<float>(scale);
  // Last first, so that the first (highest-scoring) detection ends on top.
  for (auto it = points.rbegin(); it != points.rend(); ++it) {
    const DrawnPoints& p = *it;
    const cv::Vec3b c = ClassColor(p.label + 1);
    float top = 0.f;
    for (float w : p.weights) top = std::max(top, w);
    for (size_t i = 0; i < p.points.size() && i < p.weights.size(); ++i) {
      const float rel = top > 0.f ? p.weights[i] / top : 0.f;
      const int radius = 1 + static_cast<int>(std::lround(5.f * std::sqrt(rel)));
      const cv::Point centre(static_cast<int>(std::lround(p.points[i].x * s)),
                             static_cast<int>(std::lround(p.points[i].y * s)));
      cv::circle(out, centre, radius, cv::Scalar(c[0], c[1], c[2]), cv::FILLED, cv::LINE_AA);
      cv::circle(out, centre, radius, cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
    }
  }
  for (auto it = boxes.rbegin(); it != boxes.rend(); ++it) {
    const DrawnBox& b = *it;
    const cv::Vec3b c = ClassColor(b.label + 1);
    const cv::Scalar colour(c[0], c[1], c[2]);
    const cv::Point p1(static_cast<int>(std::lround(b.x1 * s)),
                       static_cast<int>(std::lround(b.y1 * s)));
    const cv::Point p2(static_cast<int>(std::lround(b.x2 * s)) - 1,
                       static_cast<int>(std::lround(b.y2 * s)) - 1);
    cv::rectangle(out, p1, p2, colour, 2);
    int baseline = 0;
    const cv::Size text = cv::getTextSize(b.caption, cv::FONT_HERSHEY_SIMPLEX, 0.45, 1, &baseline);
    const int x = std::clamp(p1.x, 0, std::max(0, out.cols - text.width - 2));
    const int y = std::clamp(p1.y - 3, text.height + 2, std::max(text.height + 2, out.rows - 2));
    cv::rectangle(out, cv::Point(x, y - text.height - 2), cv::Point(x + text.width + 2, y + 2),
                  colour, cv::FILLED);
    cv::putText(out, b.caption, cv::Point(x + 1, y), cv::FONT_HERSHEY_SIMPLEX, 0.45,
                cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
  }
  return out;
}

}  // namespace gatescope::client
