#include "client/detection_view.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "client/ground_truth.h"
#include "client/segmentation_view.h"

namespace gatescope::client {
namespace {

cv::Mat Black(int h, int w) { return cv::Mat(h, w, CV_8UC1, cv::Scalar(0)); }

TEST(DetectionViewTest, PointsOutsideTheImageAreCountedAndGetAMargin) {
  DrawnPoints p;
  p.points = {{1, 1}, {-3, 5}, {10, 50}, {99, 9}, {100, 9}};  // image 100 x 20
  p.weights = {1, 1, 1, 1, 1};
  EXPECT_EQ(PointsOutside({p}, {100, 20}), 3);
  DetectionDrawing plain, with_points;
  with_points.points = {p};
  const cv::Mat a = DetectionPicture(Black(20, 100), plain);
  const cv::Mat b = DetectionPicture(Black(20, 100), with_points);
  // Enlarged 20x to 384+ rows; the points add a quarter margin each side and a footer.
  ASSERT_EQ(a.size(), cv::Size(2000, 400));
  EXPECT_EQ(b.cols, 2000 + 2 * 500);
  EXPECT_EQ(b.rows, 400 + 2 * 100 + 20);
  // The point at x = -3 is drawn in the left margin, not clipped away.
  const cv::Vec3b margin_point = b.at<cv::Vec3b>(100 + 5 * 20, 500 - 3 * 20);
  EXPECT_NE(margin_point, cv::Vec3b(40, 40, 40));
  EXPECT_TRUE(DetectionPicture(cv::Mat(), with_points).empty());
}

TEST(DetectionViewTest, OverlappingCaptionsArePlacedApart) {
  // Five boxes on one object: the captions must not cover each other.
  DetectionDrawing d;
  for (int i = 0; i < 5; ++i) {
    d.boxes.push_back({10.f + i, 10.f + i, 40.f, 40.f, i, "label " + std::to_string(i) + " 0.5"});
  }
  const cv::Mat picture = DetectionPicture(Black(64, 64), d);
  ASSERT_FALSE(picture.empty());
  // Each caption's background is its class colour: count the rows where each colour fills
  // a caption-wide run; five distinct colours must each have visible runs.
  int visible = 0;
  for (int i = 0; i < 5; ++i) {
    const cv::Vec3b c = ClassColor(i + 1);
    cv::Mat mask;
    cv::inRange(picture, cv::Scalar(c[0], c[1], c[2]), cv::Scalar(c[0], c[1], c[2]), mask);
    visible += cv::countNonZero(mask) > 400;  // a caption box, not just a 2 px frame
  }
  EXPECT_EQ(visible, 5);
}

TEST(GroundTruthTest, DiceAndMatchedBoxes) {
  cv::Mat truth(4, 4, CV_8UC1, cv::Scalar(0)), pred(4, 4, CV_8UC1, cv::Scalar(0));
  truth(cv::Rect(0, 0, 2, 2)).setTo(1);  // 4 px of class 1
  pred(cv::Rect(0, 0, 2, 1)).setTo(1);   // 2 px, both right
  pred.at<uchar>(3, 3) = 2;              // a class the truth lacks
  const std::map<int, double> dice = DiceByClass(pred, truth);
  ASSERT_EQ(dice.size(), 2u);
  EXPECT_DOUBLE_EQ(dice.at(1), 2.0 * 2 / (2 + 4));
  EXPECT_DOUBLE_EQ(dice.at(2), 0.0);
  EXPECT_DOUBLE_EQ(MeanDice(dice), (2.0 / 3) / 2);
  EXPECT_TRUE(DiceByClass(pred, cv::Mat(3, 3, CV_8UC1)).empty());
  EXPECT_DOUBLE_EQ(MeanDice({}), 1.0);
  const std::vector<DrawnBox> t = {{0, 0, 10, 10, 0, ""}, {20, 20, 30, 30, 0, ""}};
  const std::vector<DrawnBox> p = {{1, 1, 10, 10, 0, ""}, {0, 0, 10, 10, 0, ""},
                                   {50, 50, 60, 60, 0, ""}};
  EXPECT_EQ(MatchedBoxes(p, t), 1);  // one predicted box per true box
}

TEST(GroundTruthTest, EmptyOrColourLabelFilesAreRefused) {
  const std::string empty = ::testing::TempDir() + "/empty_labels.png";
  { std::ofstream touch(empty); }
  const absl::StatusOr<cv::Mat> none = ReadLabelImage(empty);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string colour = ::testing::TempDir() + "/colour_labels.png";
  ASSERT_TRUE(cv::imwrite(colour, cv::Mat(4, 4, CV_8UC3, cv::Scalar(1, 2, 3))));
  EXPECT_EQ(ReadLabelImage(colour).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadLabelImage(colour + ".missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(DetectionViewTest, NonFiniteAndHugeCoordinatesArePinnedInsideTheCanvas) {
  DrawnPoints p;
  p.points = {{std::nanf(""), 5.f}, {4.3e9f, 4.3e9f}, {-3e38f, 1.f}};
  p.weights = {1, 1, 1};
  EXPECT_EQ(PointsOutside({p}, {10, 10}), 3);
  DetectionDrawing d;
  d.points = {p};
  d.boxes = {{-1e30f, 0.f, 1e30f, 5.f, 0, "wide"}};
  EXPECT_FALSE(DetectionPicture(Black(10, 10), d).empty());
}

}  // namespace
}  // namespace gatescope::client
