#include "server/preprocess/image_codec.h"

#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "server/preprocess/image.h"

namespace gatescope {
namespace {

std::string Encode(const char* ext, const cv::Mat& image, std::vector<int> params = {}) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, image, buf, params)) << ext;
  return std::string(buf.begin(), buf.end());
}

// A smooth colour gradient with some texture: decoders disagree visibly on such an image
// if they convert or scale differently.
cv::Mat Pattern(int rows, int cols, int type = CV_8UC3) {
  cv::Mat bgr(rows, cols, CV_8UC3);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      bgr.at<cv::Vec3b>(r, c) = cv::Vec3b(static_cast<uchar>((r * 255) / rows),
                                          static_cast<uchar>((c * 255) / cols),
                                          static_cast<uchar>(((r + c) * 7) % 256));
    }
  }
  cv::Mat out;
  switch (type) {
    case CV_8UC1: cv::cvtColor(bgr, out, cv::COLOR_BGR2GRAY); break;
    case CV_8UC4: cv::cvtColor(bgr, out, cv::COLOR_BGR2BGRA); break;
    case CV_16UC3: bgr.convertTo(out, CV_16UC3, 257.0); break;
    default: out = bgr;
  }
  return out;
}

InputSpec GraySpec(int64_t side) {
  InputSpec spec;
  for (int64_t d : {int64_t{1}, side, side}) spec.add_shape(d);
  spec.set_color("gray");
  spec.set_scale(1.f);
  spec.add_mean(0.f);
  spec.add_std(1.f);
  return spec;
}

// Every variant decodes to exactly what OpenCV's own decoder gives (in RGB order).
TEST(ImageCodec, DecodesLikeOpenCv) {
  struct Case {
    const char* ext;
    int type;
  };
  for (const Case& c : {Case{".png", CV_8UC1}, Case{".png", CV_8UC3}, Case{".png", CV_8UC4},
                        Case{".png", CV_16UC3}, Case{".jpg", CV_8UC1}, Case{".jpg", CV_8UC3}}) {
    const std::string bytes = Encode(c.ext, Pattern(37, 53, c.type));
    const absl::StatusOr<ImageHeader> header = ReadImageHeader(bytes);
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->size, (ImageSize{37, 53}));
    for (bool gray : {true, false}) {
      SCOPED_TRACE(std::string(c.ext) + " type " + std::to_string(c.type) +
                   (gray ? " to gray" : " to RGB"));
      const absl::StatusOr<cv::Mat> ours = DecodeImagePixels(bytes, *header, {gray, {}});
      ASSERT_TRUE(ours.ok()) << ours.status();
      cv::Mat theirs = cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1,
                                            const_cast<char*>(bytes.data())),
                                    gray ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
      if (!gray) cv::cvtColor(theirs, theirs, cv::COLOR_BGR2RGB);
      ASSERT_EQ(ours->type(), theirs.type());
      ASSERT_EQ(ours->size(), theirs.size());
      EXPECT_EQ(cv::norm(*ours, theirs, cv::NORM_INF), 0.0);
    }
  }
}

TEST(ImageCodec, OnlyPngAndJpegAreAccepted) {
  const cv::Mat image = Pattern(16, 16);
  int refused = 0;
  for (const char* ext : {".bmp", ".tiff", ".ppm", ".pgm"}) {
    std::vector<uchar> buf;
    if (!cv::imencode(ext, ext == std::string(".pgm") ? Pattern(16, 16, CV_8UC1) : image, buf)) {
      continue;  // this OpenCV build cannot write the format; nothing to refuse
    }
    const std::string bytes(buf.begin(), buf.end());
    const absl::StatusOr<ImageHeader> header = ReadImageHeader(bytes);
    ASSERT_FALSE(header.ok()) << ext;
    EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(header.status().message().find("neither PNG nor JPEG"), std::string::npos);
    EXPECT_FALSE(DecodeImage(bytes, GraySpec(16)).ok()) << ext;
    ++refused;
  }
  EXPECT_GE(refused, 2);  // BMP and PxM writers are always built into OpenCV
  EXPECT_FALSE(ReadImageHeader("not an image").ok());
  EXPECT_FALSE(ReadImageHeader("").ok());
  EXPECT_FALSE(DeclaredImageSize(Encode(".png", image).substr(0, 20)).has_value());
  EXPECT_FALSE(DeclaredImageSize(Encode(".jpg", image).substr(0, 30)).has_value());
}

// Rewrites the first SOF0 frame of a baseline JPEG to declare height x width.
std::string DeclareJpegSize(std::string jpeg, int height, int width) {
  const size_t sof = jpeg.find("\xFF\xC0", 2);
  EXPECT_NE(sof, std::string::npos);
  jpeg[sof + 5] = static_cast<char>(height >> 8);
  jpeg[sof + 6] = static_cast<char>(height & 0xFF);
  jpeg[sof + 7] = static_cast<char>(width >> 8);
  jpeg[sof + 8] = static_cast<char>(width & 0xFF);
  return jpeg;
}

// The attack a header reader of our own fell for: a stray byte before the frame marker,
// which libjpeg skips (with a warning) and decodes the 30000 x 30000 frame anyway. The size
// now comes from libjpeg's header read, so the bomb is refused before any allocation.
TEST(ImageCodec, StrayByteDoesNotHideAJpegBomb) {
  std::string bomb = DeclareJpegSize(Encode(".jpg", Pattern(8, 8)), 30000, 30000);
  bomb.insert(bomb.find("\xFF\xC0", 2), 1, '\x00');
  const std::optional<ImageSize> declared = DeclaredImageSize(bomb);
  ASSERT_TRUE(declared.has_value());
  EXPECT_EQ(*declared, (ImageSize{30000, 30000}));
  testing::internal::CaptureStderr();
  const absl::StatusOr<at::Tensor> decoded = DecodeImage(bomb, GraySpec(28));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // libjpeg's warning is not printed
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("30000x30000"), std::string::npos)
      << decoded.status();
}

TEST(ImageCodec, HugeDeclaredPngIsRefusedBeforeDecoding) {
  std::string png = Encode(".png", Pattern(4, 4, CV_8UC1));
  // IHDR width and height (big-endian at bytes 16 and 20) rewritten to 100000 x 100000 and
  // the chunk's CRC (bytes 29..32) left stale: libpng refuses it while reading the header.
  for (int at : {16, 20}) {
    png[at] = 0;
    png[at + 1] = 0x01;
    png[at + 2] = static_cast<char>(0x86);
    png[at + 3] = static_cast<char>(0xA0);
  }
  const absl::StatusOr<at::Tensor> decoded = DecodeImage(png, GraySpec(32));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
}

// A JPEG far larger than the model is decoded at the smallest DCT scale still covering the
// model's size, and the model input stays close to a full decode shrunk by area.
TEST(ImageCodec, LargeJpegIsDecodedAtAReducedScale) {
  const std::string bytes = Encode(".jpg", Pattern(600, 800), {cv::IMWRITE_JPEG_QUALITY, 95});
  const absl::StatusOr<ImageHeader> header = ReadImageHeader(bytes);
  ASSERT_TRUE(header.ok());
  const absl::StatusOr<cv::Mat> small = DecodeImagePixels(bytes, *header, {true, {28, 28}});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->rows, 75);   // 600 / 8
  EXPECT_EQ(small->cols, 100);  // 800 / 8
  const absl::StatusOr<cv::Mat> half = DecodeImagePixels(bytes, *header, {true, {200, 300}});
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->rows, 300);  // 1/4 would give 150 rows, fewer than 200
  EXPECT_EQ(half->cols, 400);

  const absl::StatusOr<at::Tensor> served = DecodeImage(bytes, GraySpec(28));
  ASSERT_TRUE(served.ok()) << served.status();
  cv::Mat full = cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1,
                                      const_cast<char*>(bytes.data())),
                              cv::IMREAD_GRAYSCALE);
  cv::Mat shrunk;
  cv::resize(full, shrunk, cv::Size(28, 28), 0, 0, cv::INTER_AREA);
  cv::Mat reference;
  shrunk.convertTo(reference, CV_32F);
  const cv::Mat ours(28, 28, CV_32F, served->contiguous().data_ptr<float>());
  EXPECT_LT(cv::norm(ours, reference, cv::NORM_L1) / (28 * 28), 2.0);  // 0..255 units
}

// Corrupt data is reported in the status only: the libraries print nothing.
TEST(ImageCodec, CorruptImagesAreRefusedSilently) {
  const std::string jpeg = Encode(".jpg", Pattern(64, 64));
  const std::string png = Encode(".png", Pattern(64, 64));
  std::string bad_png = png;
  bad_png[bad_png.size() / 2] ^= 0x55;  // inside IDAT: CRC mismatch
  testing::internal::CaptureStderr();
  const absl::StatusOr<at::Tensor> truncated_png = DecodeImage(png.substr(0, png.size() / 2),
                                                               GraySpec(64));
  const absl::StatusOr<at::Tensor> corrupt_png = DecodeImage(bad_png, GraySpec(64));
  // A truncated JPEG still decodes (the missing rows grey), as every JPEG decoder does.
  const absl::StatusOr<at::Tensor> truncated_jpeg =
      DecodeImage(jpeg.substr(0, jpeg.size() * 3 / 4), GraySpec(64));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(truncated_png.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(truncated_png.status().message().find("PNG could not be decoded"),
            std::string::npos);
  EXPECT_EQ(corrupt_png.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(truncated_jpeg.ok()) << truncated_jpeg.status();
}

}  // namespace
}  // namespace gatescope
