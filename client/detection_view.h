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

// What DetectionPicture draws besides the image.
struct DetectionDrawing {
  std::vector<DrawnBox> boxes;        // detections, highest score first
  std::vector<DrawnPoints> points;    // sampling points per detection (may be empty)
  std::vector<DrawnBox> truth;        // ground-truth boxes (white, dashed), may be empty
  bool density = false;               // colour the weighted density of all points under them
  std::string title;                  // printed above the picture when not empty
};

// `image` (8-bit BGR or grayscale) enlarged by DetectionScale (nearest neighbour), with:
// each box in ClassColor(label + 1) with its caption placed where it overlaps no other
// caption (above the box, inside it, below it, or stacked further down), drawn last to
// first so the first (highest-scoring) ends on top; each detection's points as dots in its
// colour, radius growing with the weight (relative to that detection's largest); with
// `density`, the attention-weighted density of every point on the viridis scale under them.
// When there are points, a margin around the image (a quarter of each side) shows points
// that fall outside it, and a footer counts them ("N of M sampling points (P %) outside the
// image"; beyond the margin they are pinned to its edge). Ground-truth boxes are dashed
// white. Empty if `image` is.
cv::Mat DetectionPicture(const cv::Mat& image, const DetectionDrawing& drawing);

// The number of `points` outside [0, size.width) x [0, size.height).
int PointsOutside(const std::vector<DrawnPoints>& points, cv::Size size);

}  // namespace gatescope::client
