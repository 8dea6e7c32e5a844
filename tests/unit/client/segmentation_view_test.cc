#include "client/segmentation_view.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <opencv2/imgproc.hpp>
#include <set>
#include <string>
#include <vector>

namespace gatescope::client {
namespace {

// Classes 0, 1, 2 in three columns of a 4x6 mask.
cv::Mat ThreeColumns() {
  cv::Mat m(4, 6, CV_8UC1, cv::Scalar(0));
  m.colRange(2, 4).setTo(1);
  m.colRange(4, 6).setTo(2);
  return m;
}

TEST(SegmentationViewTest, PaletteIsFixedAndDistinct) {
  EXPECT_EQ(ClassColor(0), cv::Vec3b(0, 0, 0));
  std::set<std::vector<int>> seen;
  for (int i = 0; i < 20; ++i) {
    const cv::Vec3b c = ClassColor(i);
    seen.insert({c[0], c[1], c[2]});
  }
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_EQ(ClassColor(7), ClassColor(7));
  EXPECT_NE(ClassColor(20), ClassColor(1));  // repeats are dimmed
}

TEST(SegmentationViewTest, OverlayBlendsClassColoursOverTheImage) {
  const cv::Mat gray(4, 6, CV_8UC1, cv::Scalar(200));
  const cv::Mat out = MaskOverlay(gray, ThreeColumns(), 0.5);
  ASSERT_EQ(out.type(), CV_8UC3);
  ASSERT_EQ(out.size(), cv::Size(6, 4));
  EXPECT_EQ(out.at<cv::Vec3b>(0, 0), cv::Vec3b(100, 100, 100));  // background darkens
  const cv::Vec3b c1 = ClassColor(1), got = out.at<cv::Vec3b>(1, 2);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(got[k], (200 + c1[k]) / 2.0, 1.0) << k;
  // Without an image, the colours alone; a differently sized image is resized.
  EXPECT_EQ(MaskOverlay(cv::Mat(), ThreeColumns()).at<cv::Vec3b>(3, 5), ClassColor(2));
  EXPECT_EQ(MaskOverlay(cv::Mat(8, 12, CV_8UC3, cv::Scalar(1, 2, 3)), ThreeColumns()).size(),
            cv::Size(6, 4));
  EXPECT_TRUE(MaskOverlay(gray, cv::Mat(4, 6, CV_32FC1)).empty());
}

TEST(SegmentationViewTest, PictureHasALegendRowPerLabel) {
  const cv::Mat pic =
      SegmentationPicture(cv::Mat(40, 60, CV_8UC3, cv::Scalar(50, 50, 50)),
                          cv::Mat(40, 60, CV_8UC1, cv::Scalar(1)), {"bg", "a", "b"}, {0, 2400, 0});
  // The legend's longest line ("a: 2400 px (100.0%)") is wider than the 60-pixel image:
  // the picture widens to it and the image is padded with black on the right.
  int baseline = 0;
  const int text = cv::getTextSize("a: 2400 px (100.0%)", cv::FONT_HERSHEY_SIMPLEX, 0.35, 1,
                                   &baseline).width;
  ASSERT_EQ(pic.cols, std::max(60, kLegendRowHeight + 6 + text));
  ASSERT_GT(pic.cols, 60);
  EXPECT_EQ(pic.rows, 40 + 3 * kLegendRowHeight);
  EXPECT_EQ(pic.at<cv::Vec3b>(20, pic.cols - 1), cv::Vec3b(0, 0, 0));
  EXPECT_NE(pic.at<cv::Vec3b>(20, 30), cv::Vec3b(0, 0, 0));
  // Row 1's swatch is class 1's colour.
  EXPECT_EQ(pic.at<cv::Vec3b>(40 + kLegendRowHeight + kLegendRowHeight / 2, 6), ClassColor(1));
}

TEST(SegmentationViewTest, MarkPixelDrawsAroundTheScaledPoint) {
  cv::Mat tile(100, 200, CV_8UC3, cv::Scalar(0, 0, 0));
  MarkPixel(tile, cv::Size(20, 10), 4, 9);  // centre (95, 45) in tile pixels
  const int r = 4;
  EXPECT_EQ(tile.at<cv::Vec3b>(45, 95), cv::Vec3b(0, 0, 0));  // the ring's centre stays
  EXPECT_NE(tile.at<cv::Vec3b>(45, 95 + r), cv::Vec3b(0, 0, 0));
  EXPECT_EQ(tile.at<cv::Vec3b>(5, 5), cv::Vec3b(0, 0, 0));
}

}  // namespace
}  // namespace gatescope::client
