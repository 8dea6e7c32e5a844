#include "client/panel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace gatescope::client {
namespace {

// A uniform grey 28x28 BGR input.
cv::Mat GreyInput() { return cv::Mat(28, 28, CV_8UC3, cv::Scalar(100, 100, 100)); }

// A 4x4 map, 1 on the 2x2 block of rows 1-2 and columns 1-2, 0 elsewhere.
cv::Mat BlockMap() {
  cv::Mat m(4, 4, CV_32FC1, cv::Scalar(0));
  m(cv::Rect(1, 1, 2, 2)).setTo(1.0f);
  return m;
}

cv::Vec3b At(const cv::Mat& m, int y, int x) { return m.at<cv::Vec3b>(y, x); }

TEST(PanelTest, TileSizeKeepsAspectAndClampsHeight) {
  EXPECT_EQ(TileSize({28, 28}), cv::Size(112, 112));
  EXPECT_EQ(TileSize({56, 28}), cv::Size(224, 112));
  EXPECT_EQ(TileSize({300, 200}), cv::Size(300, 200));
  EXPECT_EQ(TileSize({1000, 1000}), cv::Size(224, 224));
  EXPECT_EQ(TileSize({0, 10}), cv::Size());
}

TEST(PanelTest, HeadMeanAveragesHeads) {
  const std::vector<float> v = {1, 2, 3, 6, 5, 10};  // [3 heads, 1, 2]
  const cv::Mat m = HeadMean(v.data(), 3, 1, 2);
  ASSERT_EQ(m.type(), CV_32FC1);
  ASSERT_EQ(m.size(), cv::Size(2, 1));
  EXPECT_FLOAT_EQ(m.at<float>(0, 0), 3.0f);
  EXPECT_FLOAT_EQ(m.at<float>(0, 1), 6.0f);
  EXPECT_TRUE(HeadMean(v.data(), 0, 1, 2).empty());
}

TEST(PanelTest, InputTileEnlargesByNearestNeighbour) {
  cv::Mat in(2, 2, CV_8UC1);
  in.at<uchar>(0, 0) = 10;
  in.at<uchar>(0, 1) = 20;
  in.at<uchar>(1, 0) = 30;
  in.at<uchar>(1, 1) = 40;
  const cv::Mat t = InputTile(in, {8, 8});
  ASSERT_EQ(t.type(), CV_8UC3);
  EXPECT_EQ(At(t, 3, 3), cv::Vec3b(10, 10, 10));
  EXPECT_EQ(At(t, 0, 7), cv::Vec3b(20, 20, 20));
  EXPECT_EQ(At(t, 7, 0), cv::Vec3b(30, 30, 30));
  EXPECT_EQ(At(t, 4, 4), cv::Vec3b(40, 40, 40));
}

TEST(PanelTest, OverlayBlendsJetHalfAndHalf) {
  const cv::Mat tile = OverlayTile(GreyInput(), BlockMap(), {112, 112});
  ASSERT_EQ(tile.size(), cv::Size(112, 112));
  ASSERT_EQ(tile.type(), CV_8UC3);
  // JET(255) is BGR (0, 0, 128) and JET(0) is (128, 0, 0); each blended with grey 100.
  EXPECT_EQ(At(tile, 56, 56), cv::Vec3b(50, 50, 114));   // inside the hot block
  EXPECT_EQ(At(tile, 100, 10), cv::Vec3b(114, 50, 50));  // far from it
  EXPECT_EQ(At(tile, 5, 105), cv::Vec3b(114, 50, 50));
}

TEST(PanelTest, OverlayScalesMinMaxAndDrawsNonFiniteAsMinimum) {
  const cv::Mat plain = OverlayTile(GreyInput(), BlockMap(), {112, 112});
  cv::Mat shifted = BlockMap() * 7.0 - 3.0;  // values -3 and 4
  shifted.at<float>(0, 0) = std::numeric_limits<float>::quiet_NaN();
  shifted.at<float>(3, 3) = -std::numeric_limits<float>::infinity();
  const cv::Mat tile = OverlayTile(GreyInput(), shifted, {112, 112});
  ASSERT_FALSE(tile.empty());
  EXPECT_EQ(cv::norm(tile, plain, cv::NORM_INF), 0.0);
  // A constant map is drawn as all-minimum.
  const cv::Mat flat = OverlayTile(GreyInput(), cv::Mat(4, 4, CV_32FC1, cv::Scalar(5)), {112, 112});
  EXPECT_EQ(At(flat, 56, 56), cv::Vec3b(114, 50, 50));
  EXPECT_TRUE(OverlayTile(GreyInput(), cv::Mat(4, 4, CV_8UC1), {112, 112}).empty());
}

TEST(PanelTest, PanelPlacesTilesLeftToRightOverCaptions) {
  const cv::Size size = TileSize(GreyInput().size());
  const cv::Mat input = InputTile(GreyInput(), size);
  const cv::Mat hot = OverlayTile(GreyInput(), BlockMap(), size);
  const cv::Mat panel = ComposePanel({input, hot, hot}, {"input", "rollout", "gate L0"});
  ASSERT_EQ(panel.cols, 3 * 112);
  ASSERT_EQ(panel.rows, 112 + kCaptionHeight);
  EXPECT_EQ(cv::norm(panel(cv::Rect(0, 0, 112, 112)), input, cv::NORM_INF), 0.0);
  EXPECT_EQ(cv::norm(panel(cv::Rect(112, 0, 112, 112)), hot, cv::NORM_INF), 0.0);
  // Where the map is hot the overlay tile differs from the plain input beside it.
  EXPECT_EQ(At(panel, 56, 56), cv::Vec3b(100, 100, 100));
  EXPECT_EQ(At(panel, 56, 112 + 56), cv::Vec3b(50, 50, 114));
  // Every caption strip has text drawn on its black background.
  for (int i = 0; i < 3; ++i) {
    cv::Mat strip;
    cv::cvtColor(panel(cv::Rect(i * 112, 112, 112, kCaptionHeight)), strip, cv::COLOR_BGR2GRAY);
    EXPECT_GT(cv::countNonZero(strip), 20) << "caption " << i;
  }
}

TEST(PanelTest, LongCaptionsStayInsideTheirTile) {
  const cv::Mat t(112, 112, CV_8UC3, cv::Scalar(0, 0, 0));
  const cv::Mat panel = ComposePanel({t, t}, {"dgvit_fmnist: Ankle boot", ""});
  ASSERT_EQ(panel.size(), cv::Size(224, 112 + kCaptionHeight));
  cv::Mat first, second;
  cv::cvtColor(panel(cv::Rect(0, 112, 112, kCaptionHeight)), first, cv::COLOR_BGR2GRAY);
  cv::cvtColor(panel(cv::Rect(112, 0, 112, 112 + kCaptionHeight)), second, cv::COLOR_BGR2GRAY);
  EXPECT_GT(cv::countNonZero(first), 40);
  EXPECT_EQ(cv::countNonZero(second), 0);  // nothing spilled into the neighbour
}

TEST(PanelTest, ComposeRejectsMismatchedTiles) {
  const cv::Mat a(112, 112, CV_8UC3), b(112, 100, CV_8UC3);
  EXPECT_TRUE(ComposePanel({a, b}, {"a", "b"}).empty());
  EXPECT_TRUE(ComposePanel({a}, {"a", "b"}).empty());
  EXPECT_TRUE(ComposePanel({}, {}).empty());
}

TEST(PanelTest, DecodesGreyPngToBgr) {
  cv::Mat grey(5, 7, CV_8UC1, cv::Scalar(42));
  std::vector<uchar> png;
  ASSERT_TRUE(cv::imencode(".png", grey, png));
  const cv::Mat bgr = DecodeBgr(std::string(png.begin(), png.end()));
  ASSERT_EQ(bgr.type(), CV_8UC3);
  EXPECT_EQ(bgr.size(), cv::Size(7, 5));
  EXPECT_EQ(At(bgr, 4, 6), cv::Vec3b(42, 42, 42));
  EXPECT_TRUE(DecodeBgr("not an image").empty());
}

}  // namespace
}  // namespace gatescope::client
