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

// The expected overlay pixel: 30 % the grey input (100), 70 % the scale's colour `index`.
cv::Vec3b Blend(bool diverging, int index) {
  const cv::Vec3b c = ScaleColours(diverging)[index];
  cv::Vec3b out;
  for (int k = 0; k < 3; ++k) out[k] = cv::saturate_cast<uchar>(0.3 * 100 + 0.7 * c[k]);
  return out;
}

// Rows of a rendered panel: title, tile, colour bar, caption.
constexpr int kTileTop = kTitleHeight;
constexpr int kBarTop = kTitleHeight + 112;
constexpr int kCaptionTop = kBarTop + kColourBarHeight;

int Ink(const cv::Mat& region) {
  cv::Mat grey;
  cv::cvtColor(region, grey, cv::COLOR_BGR2GRAY);
  return cv::countNonZero(grey);
}

TEST(PanelTest, MapsAreDrawnOnViridisFromZeroOverTheGreyInput) {
  MapPanel panel(GreyInput(), {112, 112}, ScaleMode::kShared);
  panel.AddInput();
  panel.AddMap(BlockMap(), "rollout", "rollout");
  const cv::Mat p = panel.Render("m: label 0.9");
  ASSERT_EQ(p.size(), cv::Size(2 * 112, kCaptionTop + kCaptionHeight));
  EXPECT_EQ(cv::norm(p(cv::Rect(0, kTileTop, 112, 112)), InputTile(GreyInput(), {112, 112}),
                     cv::NORM_INF),
            0.0);
  EXPECT_EQ(At(p, kTileTop + 56, 112 + 56), Blend(false, 255));  // the hot block: top colour
  EXPECT_EQ(At(p, kTileTop + 100, 112 + 10), Blend(false, 0));   // zero: the bottom colour
  // The map has a colour bar and a two-line caption; the input has no bar; the title is drawn.
  EXPECT_EQ(Ink(p(cv::Rect(0, kBarTop, 112, kColourBarHeight))), 0);
  EXPECT_GT(Ink(p(cv::Rect(112, kBarTop, 112, kColourBarHeight))), 500);
  EXPECT_GT(Ink(p(cv::Rect(112, kCaptionTop + kCaptionHeight / 2, 112, kCaptionHeight / 2))), 20);
  EXPECT_GT(Ink(p(cv::Rect(0, 0, 2 * 112, kTitleHeight))), 20);
}

TEST(PanelTest, ASharedScaleKeepsASmallMapDarkAndATileScaleDoesNot) {
  for (const ScaleMode mode : {ScaleMode::kShared, ScaleMode::kTile}) {
    MapPanel panel(GreyInput(), {112, 112}, mode);
    panel.AddMap(BlockMap(), "gate L0", "gate");
    panel.AddMap(BlockMap() * 0.1, "gate L1", "gate");
    panel.AddMap(BlockMap() * 0.01, "res L0", "resonance");  // another quantity
    const cv::Mat p = panel.Render("");
    EXPECT_EQ(At(p, kTileTop + 56, 56), Blend(false, 255));
    // 0.1 of the shared maximum is index 26; on its own scale it is the top colour.
    EXPECT_EQ(At(p, kTileTop + 56, 112 + 56),
              Blend(false, mode == ScaleMode::kShared ? 26 : 255));
    // A different quantity is never put on the gates' scale.
    EXPECT_EQ(At(p, kTileTop + 56, 224 + 56), Blend(false, 255));
    EXPECT_EQ(panel.SharedScale("gate").has_value(), mode == ScaleMode::kShared);
  }
}

TEST(PanelTest, SignedMapsAreDivergingAboutZeroAndNonFiniteIsGrey) {
  cv::Mat signed_map = BlockMap() * 2.0 - 1.0;  // -1 outside the block, 1 inside
  signed_map.at<float>(0, 0) = std::numeric_limits<float>::quiet_NaN();
  cv::Mat half = cv::Mat(4, 4, CV_32FC1, cv::Scalar(0));
  MapPanel panel(GreyInput(), {112, 112}, ScaleMode::kShared);
  panel.AddMap(signed_map, "raw rollout", "rollout");
  panel.AddMap(half, "zero", "rollout");
  const cv::Mat p = panel.Render("");
  EXPECT_EQ(At(p, kTileTop + 56, 56), Blend(true, 255));    // +1: red end
  EXPECT_EQ(At(p, kTileTop + 80, 100), Blend(true, 0));     // -1: blue end
  EXPECT_EQ(At(p, kTileTop + 56, 112 + 56), Blend(true, 128));  // 0: the neutral centre
  const cv::Vec3b nan = At(p, kTileTop + 2, 2);  // NaN stays grey (30 % input, 70 % 128)
  EXPECT_EQ(nan, cv::Vec3b(120, 120, 120));
}

TEST(PanelTest, PicturesAndMarksAndLongCaptionsStayInTheirTiles) {
  MapPanel panel(GreyInput(), {112, 112}, ScaleMode::kTile);
  panel.AddPicture(cv::Mat(10, 10, CV_8UC3, cv::Scalar(0, 0, 255)), "a very long caption: "
                   "with a model name and a label that cannot fit");
  panel.AddPicture({}, "");
  const cv::Mat p = panel.Render("");
  ASSERT_EQ(p.cols, 224);
  EXPECT_EQ(At(p, kTileTop + 50, 50), cv::Vec3b(0, 0, 255));  // resized to the tile
  EXPECT_EQ(At(p, kTileTop + 50, 112 + 50), cv::Vec3b(48, 48, 48));  // an empty one is grey
  EXPECT_GT(Ink(p(cv::Rect(0, kCaptionTop, 112, kCaptionHeight))), 40);
  EXPECT_EQ(Ink(p(cv::Rect(112, kCaptionTop, 112, kCaptionHeight))), 0);  // nothing spilled
  MapPanel marked(GreyInput(), {112, 112}, ScaleMode::kTile);
  marked.AddInput();
  marked.Mark(14, 14);
  const cv::Mat m = marked.Render("");
  // Pixel (14, 14) is tile point (58, 58); the cross-hair ring has radius 4.
  EXPECT_NE(At(m, kTileTop + 58, 58 + 4), cv::Vec3b(100, 100, 100));
  EXPECT_EQ(At(m, kTileTop + 20, 20), cv::Vec3b(100, 100, 100));
  EXPECT_TRUE(MapPanel(GreyInput(), {112, 112}, ScaleMode::kTile).Render("").empty());
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
