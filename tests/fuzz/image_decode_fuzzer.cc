// libFuzzer harness: any bytes as an encoded image, for a fixed-size gray model (scaled
// JPEG decoding, resize) and an RGB model taking any size up to 64k pixels (kept small so
// each input decodes in microseconds). Decoding must return a status, never crash, leak
// or read out of bounds. And differentially: whatever PNG the direct reader (png_direct.h)
// decodes, libpng alone must decode to the same pixels.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <zlib.h>

#include <opencv2/core.hpp>

#include "server/preprocess/image.h"
#include "server/preprocess/image_codec.h"
#include "server/preprocess/png_direct.h"

namespace {

gatescope::InputSpec Spec(bool any_size) {
  gatescope::InputSpec spec;
  for (int64_t d : {any_size ? 3 : 1, 28, 28}) spec.add_shape(d);
  spec.set_color(any_size ? "rgb" : "gray");
  spec.set_scale(1.f / 255.f);
  for (int c = 0; c < (any_size ? 3 : 1); ++c) {
    spec.add_mean(0.5f);
    spec.add_std(0.25f);
  }
  spec.set_any_size(any_size);
  spec.set_max_pixels(1 << 16);
  return spec;
}

// `bytes` with the CRC of every chunk that fits recomputed: a mutation inside a chunk's
// data would otherwise only ever test the CRC check, never the inflater and row filters
// behind it.
std::string WithChunkCrcsFixed(std::string_view bytes) {
  std::string out(bytes);
  size_t at = 8;
  while (out.size() - at >= 12 && out.size() >= 8) {
    auto* p = reinterpret_cast<unsigned char*>(out.data()) + at;
    const uint64_t length = (uint64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    if (length > out.size() - at - 12) break;
    const uint32_t crc = static_cast<uint32_t>(crc32(0, p + 4, static_cast<uInt>(length) + 4));
    for (int i = 0; i < 4; ++i) p[8 + length + i] = static_cast<unsigned char>(crc >> (24 - 8 * i));
    at += 12 + length;
  }
  return out;
}

// Traps unless libpng decodes `bytes` (whose header is at most 64k pixels) to what the
// direct reader gave, when it gave anything.
void CompareWithLibpng(std::string_view bytes, bool gray) {
  const std::optional<gatescope::PngHeader> header = gatescope::ReadPngHeader(bytes);
  if (!header || uint64_t{header->width} * header->height > (1u << 16)) return;
  const std::optional<cv::Mat> direct = gatescope::DecodePngDirect(bytes, gray);
  if (!direct) return;
  gatescope::DecodeRequest request{gray, {}};
  request.png_direct = false;
  const gatescope::ImageHeader image{gatescope::ImageFormat::kPng,
                                     {header->height, header->width}};
  const absl::StatusOr<cv::Mat> libpng = gatescope::DecodeImagePixels(bytes, image, request);
  if (!libpng.ok() || libpng->type() != direct->type() || libpng->size() != direct->size() ||
      cv::norm(*libpng, *direct, cv::NORM_INF) != 0.0) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gatescope::InputSpec gray = Spec(false);
  static const gatescope::InputSpec rgb_any = Spec(true);
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gatescope::ImageSize out;
  (void)gatescope::DecodeImage(bytes, gray, &out);
  (void)gatescope::DecodeImage(bytes, rgb_any, &out);
  if (bytes.size() < 8) return 0;
  const std::string fixed = WithChunkCrcsFixed(bytes);
  for (const std::string_view png : {bytes, std::string_view(fixed)}) {
    CompareWithLibpng(png, /*gray=*/true);
    CompareWithLibpng(png, /*gray=*/false);
  }
  return 0;
}
