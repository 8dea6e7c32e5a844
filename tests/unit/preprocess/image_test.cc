#include "server/preprocess/image.h"
#include "server/preprocess/normalize.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

#include <cstring>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

namespace gatescope {
namespace {

InputSpec GraySpec(int h, int w) {
  InputSpec spec;
  spec.add_shape(1);
  spec.add_shape(h);
  spec.add_shape(w);
  spec.set_color("gray");
  spec.set_scale(1.f / 255.f);
  spec.add_mean(0.5f);
  spec.add_std(0.25f);
  return spec;
}

std::string EncodePng(const cv::Mat& img) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(".png", img, buf));
  return std::string(buf.begin(), buf.end());
}

TEST(DecodeImageTest, GrayPngIsNormalisedExactly) {
  cv::Mat img(4, 6, CV_8UC1);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) img.at<uchar>(r, c) = static_cast<uchar>(r * 40 + c * 7);
  auto t = DecodeImage(EncodePng(img), GraySpec(4, 6));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->sizes(), (std::vector<int64_t>{1, 4, 6}));
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) {
      const float want = ((r * 40 + c * 7) / 255.f - 0.5f) / 0.25f;
      EXPECT_NEAR((*t)[0][r][c].item<float>(), want, 1e-5) << r << "," << c;
    }
  }
}

TEST(DecodeImageTest, ColourImageIsConvertedAndResized) {
  cv::Mat img(56, 56, CV_8UC3, cv::Scalar(30, 60, 90));  // BGR
  auto gray = DecodeImage(EncodePng(img), GraySpec(28, 28));
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_EQ(gray->sizes(), (std::vector<int64_t>{1, 28, 28}));
  // Luma 0.299 R + 0.587 G + 0.114 B = 66.4; decoders may round to 65 or 66, so allow
  // one gray level (1/255/std = 0.0157).
  const float expect = (66.f / 255.f - 0.5f) / 0.25f;
  EXPECT_NEAR((*gray)[0][13][13].item<float>(), expect, 0.0158);

  InputSpec rgb;
  for (int64_t d : {3, 10, 12}) rgb.add_shape(d);
  rgb.set_color("rgb");
  rgb.set_scale(1.f);
  for (int c = 0; c < 3; ++c) {
    rgb.add_mean(0.f);
    rgb.add_std(1.f);
  }
  auto colour = DecodeImage(EncodePng(img), rgb);
  ASSERT_TRUE(colour.ok());
  EXPECT_EQ(colour->sizes(), (std::vector<int64_t>{3, 10, 12}));
  EXPECT_FLOAT_EQ((*colour)[0][5][5].item<float>(), 90.f);  // R first
  EXPECT_FLOAT_EQ((*colour)[2][5][5].item<float>(), 30.f);
}

TEST(DecodeImageTest, JpegIsDecoded) {
  cv::Mat img(28, 28, CV_8UC1, cv::Scalar(200));
  std::vector<uchar> buf;
  ASSERT_TRUE(cv::imencode(".jpg", img, buf));
  auto t = DecodeImage(std::string(buf.begin(), buf.end()), GraySpec(28, 28));
  ASSERT_TRUE(t.ok()) << t.status();
  // A flat JPEG decodes to (nearly) the same flat value.
  const float want = (200.f / 255.f - 0.5f) / 0.25f;
  EXPECT_NEAR(t->mean().item<float>(), want, 0.02);
  EXPECT_LT((*t - want).abs().max().item<float>(), 0.05);
}

TEST(DecodeImageTest, RejectsEmptyAndGarbage) {
  EXPECT_EQ(DecodeImage("", GraySpec(28, 28)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeImage("definitely not an image", GraySpec(28, 28)).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string truncated = EncodePng(cv::Mat(8, 8, CV_8UC1, cv::Scalar(3)));
  truncated.resize(truncated.size() / 2);
  EXPECT_EQ(DecodeImage(truncated, GraySpec(8, 8)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PixelsToTensorTest, Uint8AndFloatAgree) {
  const std::string u8 = {char(0), char(51), char(102), char(255)};
  auto a = PixelsToTensor(u8, PixelType::kUint8, {2, 2}, GraySpec(2, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<float> f = {0.f, 0.2f, 0.4f, 1.f};
  auto b = PixelsToTensor(std::string(reinterpret_cast<const char*>(f.data()), 16),
                          PixelType::kFloat32, {1, 2, 2}, GraySpec(2, 2));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(at::allclose(*a, *b, 1e-5, 1e-5));
  EXPECT_NEAR((*a)[0][1][1].item<float>(), 2.f, 1e-5);  // (1 - 0.5) / 0.25
}

// Every byte value, three channels of their own mean and std, both layouts: the one-pass
// normalisation gives Normalise's float32 values bit for bit.
TEST(NormaliseBytesTest, EqualsNormaliseExactly) {
  InputSpec spec;
  for (int64_t d : {3, 16, 16}) spec.add_shape(d);
  spec.set_scale(1.f / 255.f);
  for (float m : {0.485f, 0.456f, 0.406f}) spec.add_mean(m);
  for (float s : {0.229f, 0.224f, 0.225f}) spec.add_std(s);
  const at::Tensor hwc =
      at::arange(16 * 16 * 3, at::kLong).remainder(256).to(at::kByte).reshape({16, 16, 3});
  const at::Tensor chw = hwc.permute({2, 0, 1}).contiguous();
  const at::Tensor want = Normalise(chw.to(at::kFloat), spec);
  const at::Tensor interleaved = NormaliseBytes(hwc.data_ptr<uint8_t>(), 3, {16, 16},
                                                /*interleaved=*/true, spec);
  const at::Tensor planar = NormaliseBytes(chw.data_ptr<uint8_t>(), 3, {16, 16},
                                           /*interleaved=*/false, spec);
  EXPECT_EQ(interleaved.sizes(), want.sizes());
  EXPECT_TRUE(at::equal(interleaved, want));
  EXPECT_TRUE(at::equal(planar, want));
  // One channel: a broadcast mean and std.
  const InputSpec gray = GraySpec(16, 16);
  const at::Tensor plane = at::arange(256, at::kLong).to(at::kByte).reshape({1, 16, 16});
  EXPECT_TRUE(at::equal(NormaliseBytes(plane.data_ptr<uint8_t>(), 1, {16, 16},
                                       /*interleaved=*/true, gray),
                        Normalise(plane.to(at::kFloat), gray)));
  // And the image paths that use it: a decoded PNG and a uint8 tensor input.
  cv::Mat rgb(16, 16, CV_8UC3);
  std::memcpy(rgb.data, hwc.data_ptr<uint8_t>(), 16 * 16 * 3);
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  spec.set_color("rgb");
  auto decoded = DecodeImage(EncodePng(bgr), spec);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(at::equal(*decoded, want));
  auto tensor = PixelsToTensor(
      std::string(reinterpret_cast<const char*>(chw.data_ptr<uint8_t>()), 16 * 16 * 3),
      PixelType::kUint8, {3, 16, 16}, spec);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_TRUE(at::equal(*tensor, want));
}

TEST(PixelsToTensorTest, RejectsShapeSizeAndRange) {
  const std::string four(4, '\0');
  EXPECT_EQ(PixelsToTensor(four, PixelType::kUint8, {1, 4}, GraySpec(2, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PixelsToTensor(four, PixelType::kUint8, {2, 3}, GraySpec(2, 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<float> f = {0.f, 2.f, 0.f, 0.f};
  EXPECT_EQ(PixelsToTensor(std::string(reinterpret_cast<const char*>(f.data()), 16),
                           PixelType::kFloat32, {2, 2}, GraySpec(2, 2))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
