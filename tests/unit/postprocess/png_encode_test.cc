#include "server/postprocess/png_encode.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "server/preprocess/image_codec.h"

namespace gatescope {
namespace {

cv::Mat Noise(int rows, int cols, int type, uint64_t seed) {
  cv::Mat image(rows, cols, type);
  cv::RNG rng(seed);
  rng.fill(image, cv::RNG::UNIFORM, 0, 256);
  return image;
}

bool SamePixels(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

// `png` decoded by the server's own decoder: gray for one channel, else RGB.
cv::Mat DecodeOurs(const std::string& png, bool gray) {
  const absl::StatusOr<ImageHeader> header = ReadImageHeader(png);
  EXPECT_TRUE(header.ok()) << header.status();
  if (!header.ok()) return {};
  EXPECT_EQ(header->format, ImageFormat::kPng);
  absl::StatusOr<cv::Mat> pixels = DecodeImagePixels(png, *header, DecodeRequest{gray, {}});
  EXPECT_TRUE(pixels.ok()) << pixels.status();
  return pixels.ok() ? *pixels : cv::Mat();
}

// `png` read by libpng's simplified reader into `format` (alpha kept, nothing converted).
cv::Mat DecodeWithLibpng(const std::string& png, png_uint_32 format, int type) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, png.data(), png.size())) {
    ADD_FAILURE() << image.message;
    return {};
  }
  image.format = format;
  cv::Mat out(static_cast<int>(image.height), static_cast<int>(image.width), type);
  if (!png_image_finish_read(&image, nullptr, out.data, static_cast<png_int_32>(out.step[0]),
                             nullptr)) {
    ADD_FAILURE() << image.message;
    return {};
  }
  return out;
}

// 1x1, odd widths (rows not 4-byte aligned), a single row and a single column, and noise
// large enough to take many IDAT chunks without compressing.
const cv::Size kSizes[] = {{1, 1}, {7, 13}, {31, 4}, {1, 9}, {9, 1}, {301, 203}};

TEST(EncodePngTest, GrayRoundTripsExactly) {
  for (const cv::Size& size : kSizes) {
    const cv::Mat image = Noise(size.height, size.width, CV_8UC1, 1);
    const absl::StatusOr<std::string> png = EncodePng(image);
    ASSERT_TRUE(png.ok()) << png.status();
    EXPECT_EQ(png->compare(0, 8, "\x89PNG\r\n\x1a\n"), 0);
    EXPECT_TRUE(SamePixels(DecodeOurs(*png, /*gray=*/true), image)) << size;
  }
}

TEST(EncodePngTest, BgrIsStoredAsRgb) {
  for (const cv::Size& size : kSizes) {
    const cv::Mat bgr = Noise(size.height, size.width, CV_8UC3, 2);
    const absl::StatusOr<std::string> png = EncodePng(bgr);
    ASSERT_TRUE(png.ok()) << png.status();
    cv::Mat rgb;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    EXPECT_TRUE(SamePixels(DecodeOurs(*png, /*gray=*/false), rgb)) << size;
    EXPECT_TRUE(SamePixels(DecodeWithLibpng(*png, PNG_FORMAT_BGR, CV_8UC3), bgr)) << size;
  }
}

TEST(EncodePngTest, BgraKeepsItsAlpha) {
  for (const cv::Size& size : kSizes) {
    const cv::Mat bgra = Noise(size.height, size.width, CV_8UC4, 3);
    const absl::StatusOr<std::string> png = EncodePng(bgra);
    ASSERT_TRUE(png.ok()) << png.status();
    EXPECT_TRUE(SamePixels(DecodeWithLibpng(*png, PNG_FORMAT_BGRA, CV_8UC4), bgra)) << size;
  }
}

// An ROI's rows lie `step` bytes apart in its parent: only the ROI's own pixels are written.
TEST(EncodePngTest, TakesANonContiguousRoi) {
  const cv::Mat gray_parent = Noise(20, 33, CV_8UC1, 4);
  const cv::Mat gray = gray_parent(cv::Rect(3, 2, 11, 9));
  ASSERT_FALSE(gray.isContinuous());
  const absl::StatusOr<std::string> gray_png = EncodePng(gray);
  ASSERT_TRUE(gray_png.ok()) << gray_png.status();
  EXPECT_TRUE(SamePixels(DecodeOurs(*gray_png, /*gray=*/true), gray));

  const cv::Mat bgr_parent = Noise(20, 33, CV_8UC3, 5);
  const cv::Mat bgr = bgr_parent(cv::Rect(5, 1, 7, 13));
  ASSERT_FALSE(bgr.isContinuous());
  const absl::StatusOr<std::string> bgr_png = EncodePng(bgr);
  ASSERT_TRUE(bgr_png.ok()) << bgr_png.status();
  EXPECT_TRUE(SamePixels(DecodeWithLibpng(*bgr_png, PNG_FORMAT_BGR, CV_8UC3), bgr));
}

// A large, flat picture (a class mask's typical shape) compresses.
TEST(EncodePngTest, LargeFlatImageCompresses) {
  cv::Mat mask(1000, 1500, CV_8UC1, cv::Scalar(0));
  mask(cv::Rect(100, 200, 700, 300)).setTo(3);
  const absl::StatusOr<std::string> png = EncodePng(mask);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_LT(png->size(), size_t{20000});
  EXPECT_TRUE(SamePixels(DecodeOurs(*png, /*gray=*/true), mask));
}

TEST(EncodePngTest, RefusesWhatPngCannotHold) {
  for (const cv::Mat& image : {cv::Mat(), cv::Mat(4, 4, CV_16UC1, cv::Scalar(1)),
                               cv::Mat(4, 4, CV_8UC2, cv::Scalar(1)),
                               cv::Mat(4, 4, CV_32FC3, cv::Scalar(1))}) {
    EXPECT_EQ(EncodePng(image).status().code(), absl::StatusCode::kInvalidArgument)
        << image.type();
  }
}

}  // namespace
}  // namespace gatescope
