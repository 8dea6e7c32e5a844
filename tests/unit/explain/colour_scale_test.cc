#include "server/explain/colour_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <opencv2/imgproc.hpp>

namespace gatescope {
namespace {

cv::Mat Map(std::initializer_list<float> values) {
  cv::Mat m(1, static_cast<int>(values.size()), CV_32FC1);
  int i = 0;
  for (float v : values) m.at<float>(0, i++) = v;
  return m;
}

TEST(ColourScaleTest, RangeCountsFiniteAndNonFiniteValues) {
  const MapRange r = RangeOf(Map({0.5f, -0.25f, std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity(), 2.f}));
  EXPECT_FLOAT_EQ(r.min, -0.25f);
  EXPECT_FLOAT_EQ(r.max, 2.f);
  EXPECT_EQ(r.finite, 3);
  EXPECT_EQ(r.non_finite, 2);
  EXPECT_EQ(RangeOf(cv::Mat()).finite, 0);
}

TEST(ColourScaleTest, NonNegativeMapsStartAtZeroAndSignedOnesAreSymmetric) {
  // The segmentation query attention of the issue: 0.00033..0.00043 is drawn from 0, so
  // its maximum is not the same colour as a map ten times larger.
  const ColourScale seq = ColourScale::For(RangeOf(Map({0.00033f, 0.00043f})));
  EXPECT_FALSE(seq.diverging);
  EXPECT_FLOAT_EQ(seq.low(), 0.f);
  EXPECT_FLOAT_EQ(seq.limit, 0.00043f);
  // A signed rollout -0.196..0.214: zero is the middle of the scale.
  const ColourScale div = ColourScale::For(RangeOf(Map({-0.196f, 0.214f})));
  EXPECT_TRUE(div.diverging);
  EXPECT_FLOAT_EQ(div.low(), -0.214f);
  EXPECT_FLOAT_EQ(div.limit, 0.214f);
  // All zero (or no values): a unit scale, never a division by zero.
  EXPECT_FLOAT_EQ(ColourScale::For(RangeOf(Map({0.f, 0.f}))).limit, 1.f);
  EXPECT_FLOAT_EQ(ColourScale::For(MapRange()).limit, 1.f);
}

TEST(ColourScaleTest, SharedScalesCoverEveryMap) {
  // PLuG class-token gates of the issue: layer 0 -0.57..0.02, layer 1 -0.10..0.57.
  const MapRange u = Union({RangeOf(Map({-0.57f, 0.02f})), RangeOf(Map({-0.10f, 0.57f}))});
  EXPECT_FLOAT_EQ(u.min, -0.57f);
  EXPECT_FLOAT_EQ(u.max, 0.57f);
  const ColourScale s = ColourScale::For(u);
  EXPECT_TRUE(s.diverging);
  // On the shared scale, layer 0's maximum (0.02) is near the neutral centre, not red.
  const cv::Vec3b near_zero = Colourize(Map({0.02f}), s).at<cv::Vec3b>(0, 0);
  const cv::Vec3b top = Colourize(Map({0.57f}), s).at<cv::Vec3b>(0, 0);
  EXPECT_NEAR(near_zero[1], 221, 12);  // light grey: green as high as the others
  EXPECT_LT(top[1], 20);               // saturated red
  EXPECT_GT(top[2], 150);
}

TEST(ColourScaleTest, DivergingZeroIsNeutralAndEndsAreBlueAndRed) {
  const ColourScale s{true, 1.f};
  const cv::Mat c = Colourize(Map({-1.f, 0.f, 1.f, -5.f}), s);
  const cv::Vec3b blue = c.at<cv::Vec3b>(0, 0), grey = c.at<cv::Vec3b>(0, 1),
                  red = c.at<cv::Vec3b>(0, 2);
  EXPECT_GT(blue[0], blue[2]);
  EXPECT_GT(red[2], red[0]);
  EXPECT_NEAR(grey[0], grey[2], 4);
  EXPECT_EQ(c.at<cv::Vec3b>(0, 3), blue);  // clipped to the end
}

TEST(ColourScaleTest, SequentialScaleIsViridisDarkToLightAndNonFiniteIsGrey) {
  const ColourScale s{false, 1.f};
  const cv::Mat c = Colourize(Map({0.f, 0.5f, 1.f, std::nanf("")}), s);
  auto lightness = [&](int i) {
    cv::Mat px(1, 1, CV_8UC3, cv::Scalar(c.at<cv::Vec3b>(0, i))), lab;
    cv::cvtColor(px, lab, cv::COLOR_BGR2Lab);
    return lab.at<cv::Vec3b>(0, 0)[0];
  };
  EXPECT_LT(lightness(0), lightness(1));
  EXPECT_LT(lightness(1), lightness(2));
  EXPECT_EQ(c.at<cv::Vec3b>(0, 3), cv::Vec3b(128, 128, 128));
  // Viridis ends: dark purple and yellow.
  EXPECT_GT(c.at<cv::Vec3b>(0, 0)[0], c.at<cv::Vec3b>(0, 0)[1]);
  EXPECT_LT(c.at<cv::Vec3b>(0, 2)[0], 60);
}

TEST(ColourScaleTest, NearFlatIsSaidAndRangeTextIsCompact) {
  EXPECT_TRUE(RangeOf(Map({0.5f, 0.505f})).NearFlat());
  EXPECT_FALSE(RangeOf(Map({0.00033f, 0.00043f})).NearFlat());
  EXPECT_TRUE(RangeOf(Map({0.f, 0.f})).NearFlat());
  EXPECT_EQ(RangeText(RangeOf(Map({0.5f, 0.505f}))), "0.5..0.505 (flat)");
  EXPECT_EQ(RangeText(RangeOf(Map({0.00033f, 0.00043f}))), "3.3e-04..4.3e-04");
  EXPECT_EQ(RangeText(RangeOf(Map({-0.196f, std::nanf("")}))), "-0.196..-0.196 (flat), 1 non-finite");
  EXPECT_EQ(RangeText(MapRange()), "no finite values");
}

TEST(ColourScaleTest, ResizingKeepsNonFiniteCellsToTheirOwnExtent) {
  cv::Mat m(2, 2, CV_32FC1, cv::Scalar(1.f));
  m.at<float>(0, 0) = std::nanf("");
  const cv::Mat r = ResizeMap(m, {8, 8});
  ASSERT_EQ(r.size(), cv::Size(8, 8));
  const MapRange range = RangeOf(r);
  EXPECT_EQ(range.non_finite, 16);  // exactly the top-left quarter
  EXPECT_FLOAT_EQ(range.max, 1.f);
  EXPECT_TRUE(ResizeMap(cv::Mat(), {8, 8}).empty());
}

TEST(ColourScaleTest, ColourBarRunsLowToHighAndTicksTheDataRange) {
  const ColourScale s{false, 1.f};
  const MapRange data = RangeOf(Map({0.25f, 0.75f}));
  const cv::Mat bar = ColourBar(200, s, data);
  ASSERT_EQ(bar.rows, kColourBarHeight);
  ASSERT_EQ(bar.cols, 200);
  const std::vector<cv::Vec3b> colours = ScaleColours(false);
  // Row 6 crosses the bar: its left end is the scale's first colour, its right end the last.
  EXPECT_EQ(bar.at<cv::Vec3b>(6, 3), colours.front());
  EXPECT_EQ(bar.at<cv::Vec3b>(6, 196), colours.back());
  // The ticks: white at a quarter and three quarters of the bar.
  const int quarter = 3 + 64 * 193 / 255, three_quarters = 3 + 191 * 193 / 255;
  EXPECT_EQ(bar.at<cv::Vec3b>(6, quarter), cv::Vec3b(255, 255, 255));
  EXPECT_EQ(bar.at<cv::Vec3b>(6, three_quarters), cv::Vec3b(255, 255, 255));
  // Labels are printed under the bar.
  EXPECT_GT(cv::countNonZero(bar.rowRange(13, kColourBarHeight).reshape(1)), 20);
}

}  // namespace
}  // namespace gatescope
