#include "server/preprocess/image_header.h"

#include <cstdint>

namespace gatescope {
namespace {

uint32_t BigEndian(std::string_view b, size_t at, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

std::optional<ImageSize> PngSize(std::string_view b) {
  constexpr std::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
  if (b.size() < 24 || b.substr(0, 8) != kSignature || b.substr(12, 4) != "IHDR") {
    return std::nullopt;
  }
  return ImageSize{BigEndian(b, 20, 4), BigEndian(b, 16, 4)};
}

std::optional<ImageSize> JpegSize(std::string_view b) {
  if (b.size() < 4 || static_cast<unsigned char>(b[0]) != 0xFF ||
      static_cast<unsigned char>(b[1]) != 0xD8) {
    return std::nullopt;
  }
  size_t at = 2;
  while (at + 4 <= b.size()) {
    if (static_cast<unsigned char>(b[at]) != 0xFF) return std::nullopt;
    const unsigned marker = static_cast<unsigned char>(b[at + 1]);
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
      at += 2;  // markers without a length
      continue;
    }
    const uint32_t length = BigEndian(b, at + 2, 2);
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
                       marker != 0xCC;
    if (frame) {
      if (at + 9 > b.size()) return std::nullopt;
      return ImageSize{BigEndian(b, at + 5, 2), BigEndian(b, at + 7, 2)};
    }
    if (length < 2) return std::nullopt;
    at += 2 + length;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ImageSize> DeclaredImageSize(std::string_view bytes) {
  if (auto png = PngSize(bytes)) return png;
  return JpegSize(bytes);
}

}  // namespace gatescope
