// Inputs of any size (InputSpec.any_size) and min-max normalisation, checked against the
// direct ATen computation of models/gatescope/segmentation.py's preprocess.
#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <string>
#include <utility>
#include <vector>

#include "server/preprocess/image.h"

namespace gatescope {
namespace {

InputSpec MinMaxSpec(int64_t c, int64_t h, int64_t w, bool any_size = true) {
  InputSpec spec;
  for (int64_t d : {c, h, w}) spec.add_shape(d);
  spec.set_color(c == 1 ? "gray" : "rgb");
  spec.set_scale(1.f / 255.f);
  for (int64_t i = 0; i < c; ++i) {
    spec.add_mean(0.f);
    spec.add_std(1.f);
  }
  spec.set_normalization("minmax");
  spec.set_any_size(any_size);
  return spec;
}

// The Python reference in ATen: batch of one, interpolate, per-image min-max.
at::Tensor Reference(const at::Tensor& pixels, int64_t h, int64_t w) {
  at::Tensor x = pixels.to(at::kFloat).unsqueeze(0);
  if (x.size(2) != h || x.size(3) != w) {
    x = at::upsample_bilinear2d(x, {h, w}, /*align_corners=*/false);
  }
  const at::Tensor flat = x.reshape({x.size(0), -1});
  const at::Tensor lo = flat.amin(1).view({-1, 1, 1, 1});
  const at::Tensor hi = flat.amax(1).view({-1, 1, 1, 1});
  return ((x - lo) / (hi - lo + 1e-6)).squeeze(0);
}

std::string Bytes(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

at::Tensor RandomPixels(std::vector<int64_t> shape, int seed) {
  at::manual_seed(seed);
  return at::randint(0, 256, shape, at::kByte);
}

TEST(AnySizeTest, Uint8ResizeAndMinMaxEqualTheReferenceExactly) {
  for (auto [h0, w0] :
       std::vector<std::pair<int64_t, int64_t>>{{37, 53}, {300, 250}, {224, 192}, {1, 1}}) {
    const at::Tensor pixels = RandomPixels({1, h0, w0}, h0);
    ImageSize size;
    auto got = PixelsToTensor(Bytes(pixels), PixelType::kUint8, {1, h0, w0},
                              MinMaxSpec(1, 224, 192), &size);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(size, (ImageSize{h0, w0}));
    ASSERT_EQ(got->sizes(), (std::vector<int64_t>{1, 224, 192}));
    EXPECT_TRUE(at::equal(*got, Reference(pixels, 224, 192))) << h0 << "x" << w0;
  }
}

TEST(AnySizeTest, TwoDimensionalGrayAndRgbTensors) {
  const at::Tensor gray = RandomPixels({20, 30}, 1);
  auto g = PixelsToTensor(Bytes(gray), PixelType::kUint8, {20, 30}, MinMaxSpec(1, 16, 8));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(at::equal(*g, Reference(gray.unsqueeze(0), 16, 8)));

  const at::Tensor rgb = RandomPixels({3, 9, 41}, 2);
  ImageSize size;
  auto c = PixelsToTensor(Bytes(rgb), PixelType::kUint8, {3, 9, 41}, MinMaxSpec(3, 32, 64), &size);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(size, (ImageSize{9, 41}));
  EXPECT_TRUE(at::equal(*c, Reference(rgb, 32, 64)));
}

TEST(AnySizeTest, Float32PixelsAreScaledBy255First) {
  at::manual_seed(3);
  const at::Tensor f = at::rand({1, 17, 23}, at::kFloat);
  auto got = PixelsToTensor(Bytes(f), PixelType::kFloat32, {1, 17, 23}, MinMaxSpec(1, 32, 32));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(at::equal(*got, Reference(f * 255.f, 32, 32)));
}

TEST(AnySizeTest, MinMaxWithoutAnySizeNeedsTheModelShape) {
  const at::Tensor pixels = RandomPixels({1, 8, 8}, 4);
  ImageSize size;
  auto same = PixelsToTensor(Bytes(pixels), PixelType::kUint8, {1, 8, 8},
                             MinMaxSpec(1, 8, 8, /*any_size=*/false), &size);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(size, (ImageSize{8, 8}));
  EXPECT_TRUE(at::equal(*same, Reference(pixels, 8, 8)));
  auto other = PixelsToTensor(Bytes(RandomPixels({1, 9, 8}, 4)), PixelType::kUint8, {1, 9, 8},
                              MinMaxSpec(1, 8, 8, /*any_size=*/false));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(other.status().message()).find("does not match the model input"),
            std::string::npos);
}

TEST(AnySizeTest, ConstantImageBecomesZero) {
  const at::Tensor flat = at::full({1, 5, 7}, 77, at::kByte);
  auto got = PixelsToTensor(Bytes(flat), PixelType::kUint8, {1, 5, 7}, MinMaxSpec(1, 10, 14));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->abs().max().item<float>(), 0.f);
}

TEST(AnySizeTest, RejectsWrongChannelsZeroAndHugeSizes) {
  const InputSpec gray = MinMaxSpec(1, 224, 192);
  auto rgb = PixelsToTensor(std::string(3 * 4 * 4, '\0'), PixelType::kUint8, {3, 4, 4}, gray);
  EXPECT_EQ(rgb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rgb.status().message(), "tensor has 3 channels, model expects 1");
  auto two_d =
      PixelsToTensor(std::string(16, '\0'), PixelType::kUint8, {4, 4}, MinMaxSpec(3, 8, 8));
  EXPECT_EQ(two_d.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1, 0, 5},
                                            {1, 5, 0},
                                            {1, -3, 5},
                                            {1, 8193, 1},
                                            {1, 4097, 4097},
                                            {1, 2, 3, 4}}) {
    auto st = PixelsToTensor("", PixelType::kUint8, shape, gray).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << shape[1];
  }
  // The largest accepted size passes the shape checks (and then needs its bytes).
  auto bytes = PixelsToTensor("", PixelType::kUint8, {1, 4096, 4096}, gray).status();
  EXPECT_NE(std::string(bytes.message()).find("bytes, shape needs"), std::string::npos) << bytes;
}

TEST(AnySizeTest, DecodedImagesKeepTheirSizeUntilTheTorchResize) {
  const at::Tensor pixels = RandomPixels({45, 61}, 5);
  const cv::Mat img(45, 61, CV_8UC1, pixels.data_ptr());
  std::vector<uchar> png;
  ASSERT_TRUE(cv::imencode(".png", img, png));
  ImageSize size;
  auto got = DecodeImage(std::string(png.begin(), png.end()), MinMaxSpec(1, 224, 192), &size);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(size, (ImageSize{45, 61}));
  EXPECT_TRUE(at::equal(*got, Reference(pixels.unsqueeze(0), 224, 192)));

  // Without any_size OpenCV resizes and the outputs map to the model's size.
  auto fixed = DecodeImage(std::string(png.begin(), png.end()),
                           MinMaxSpec(1, 32, 32, /*any_size=*/false), &size);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(size, (ImageSize{32, 32}));
  EXPECT_EQ(fixed->sizes(), (std::vector<int64_t>{1, 32, 32}));
}

TEST(AnySizeTest, DecodeRejectsImagesOverTheSideLimit) {
  std::vector<uchar> png;
  ASSERT_TRUE(cv::imencode(".png", cv::Mat(1, 8193, CV_8UC1, cv::Scalar(9)), png));
  auto got = DecodeImage(std::string(png.begin(), png.end()), MinMaxSpec(1, 224, 192));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
