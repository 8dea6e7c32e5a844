// Pictures of detections: boxes with captions over the input, and the sampling points of
// the decoder's deformable attention (the Deformable-DETR / PLuG papers' figures). Pure
// OpenCV (no gRPC); OpenCV may throw cv::Exception on allocation failures.
#pragma once

#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace gatescope::client {

// One detection as drawn: corners in input pixels, class index (colour), caption.
struct DrawnBox {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int label = 0;
  std::string caption;
};

// Sampling points of one detection: (x, y) input pixels and their attention weights.
struct DrawnPoints {
  std::vector<cv::Point2f> points;
  std::vector<float> weights;
  int label = 0;  // colour of the detection
};

// How much DetectionPicture enlarges an input of `input` size: the smallest integer factor
// that makes the height at least `min_height` (1 for tall enough inputs).
int DetectionScale(cv::Size input, int min_height = 384);

// `image` (8-bit BGR or grayscale) enlarged by DetectionScale (nearest neighbour), each
// box drawn in ClassColor(label + 1) with its caption above it (inside the picture), and
// each detection's points as filled dots in its colour, radius growing with the weight
// (weights are relative to the largest of that detection). Detections are drawn last to
// first, so the first (the highest-scoring, in a response's order) ends on top. Points and
// boxes outside the picture are clipped by the drawing.
cv::Mat DetectionPicture(const cv::Mat& image, const std::vector<DrawnBox>& boxes,
                         const std::vector<DrawnPoints>& points = {});

}  // namespace gatescope::client
