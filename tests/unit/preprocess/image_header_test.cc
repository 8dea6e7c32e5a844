#include "server/preprocess/image_header.h"

#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "server/preprocess/image.h"

namespace gatescope {
namespace {

std::string Encode(const char* ext, int rows, int cols) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, cv::Mat(rows, cols, CV_8UC3, cv::Scalar(9, 99, 199)), buf));
  return std::string(buf.begin(), buf.end());
}

TEST(DeclaredImageSize, ReadsPngAndJpegHeaders) {
  for (const char* ext : {".png", ".jpg"}) {
    const auto size = DeclaredImageSize(Encode(ext, 37, 53));
    ASSERT_TRUE(size.has_value()) << ext;
    EXPECT_EQ(size->height, 37) << ext;
    EXPECT_EQ(size->width, 53) << ext;
  }
  EXPECT_FALSE(DeclaredImageSize("not an image").has_value());
  EXPECT_FALSE(DeclaredImageSize(Encode(".png", 5, 5).substr(0, 20)).has_value());
}

TEST(DeclaredImageSize, HugeDeclaredPngIsRefusedBeforeDecoding) {
  std::string png = Encode(".png", 4, 4);
  // IHDR width and height (big-endian at bytes 16 and 20) rewritten to 100000 x 100000; the
  // CRC no longer matches, which does not matter: the size check comes first.
  for (int at : {16, 20}) {
    png[at] = 0;
    png[at + 1] = 0x01;
    png[at + 2] = static_cast<char>(0x86);
    png[at + 3] = static_cast<char>(0xA0);
  }
  InputSpec spec;
  for (int64_t d : {1, 32, 32}) spec.add_shape(d);
  spec.set_color("gray");
  spec.set_scale(1.f / 255.f);
  spec.add_mean(0.f);
  spec.add_std(1.f);
  const auto decoded = DecodeImage(png, spec);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("100000"), std::string::npos)
      << decoded.status().message();
}

}  // namespace
}  // namespace gatescope
