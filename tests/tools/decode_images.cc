// Decodes PNG and JPEG files as the server does (DecodeImagePixels: the direct PNG reader
// where it can, libpng or libjpeg otherwise) and with libpng alone for the pixels (a PNG's
// header comes from its IHDR either way), alternating the two over every file. Prints one
// JSON line: microseconds per image for each (header reads included, as on a request's
// path), how many files the direct reader took, and whether both gave the same pixels.
// Exits 1 when any file decodes differently (or in one way only). Used by
// benchmarks/bench_png_decode.py and tests/integration/test_png_decode.py.
//
//   decode_images [--repeat N] [--rgb] FILE...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "server/preprocess/image_codec.h"
#include "server/preprocess/png_direct.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Decoded {
  bool ok = false;
  cv::Mat pixels;
};

// What a request's path does with `bytes`: the size for the hand-off decision, the header,
// the pixels.
Decoded Decode(const std::string& bytes, bool gray, bool png_direct) {
  (void)gatescope::DeclaredImageSize(bytes);
  const absl::StatusOr<gatescope::ImageHeader> header = gatescope::ReadImageHeader(bytes);
  if (!header.ok()) return {};
  gatescope::DecodeRequest request{gray, {}};
  request.png_direct = png_direct;
  absl::StatusOr<cv::Mat> pixels = gatescope::DecodeImagePixels(bytes, *header, request);
  if (!pixels.ok()) return {};
  return {true, *std::move(pixels)};
}

bool Same(const Decoded& a, const Decoded& b) {
  if (a.ok != b.ok) return false;
  if (!a.ok) return true;
  return a.pixels.type() == b.pixels.type() && a.pixels.size() == b.pixels.size() &&
         cv::norm(a.pixels, b.pixels, cv::NORM_INF) == 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 200;
  bool gray = true;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else if (arg == "--rgb") {
      gray = false;
    } else {
      std::ifstream in(arg, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      if (!in) {
        std::fprintf(stderr, "decode_images: cannot read %s\n", arg.c_str());
        return 2;
      }
      files.push_back(text.str());
    }
  }
  if (files.empty() || repeat < 1) {
    std::fprintf(stderr, "usage: decode_images [--repeat N] [--rgb] FILE...\n");
    return 2;
  }
  int direct = 0, differ = 0;
  for (const std::string& f : files) {
    direct += gatescope::DecodePngDirect(f, gray).has_value() ? 1 : 0;
    differ += Same(Decode(f, gray, true), Decode(f, gray, false)) ? 0 : 1;
  }
  // Alternate the two ways by round so both see the same machine state.
  Clock::duration served{}, libpng{};
  double sink = 0;
  for (int r = 0; r < repeat; ++r) {
    for (bool png_direct : {r % 2 == 0, r % 2 != 0}) {
      const Clock::time_point start = Clock::now();
      for (const std::string& f : files) {
        const Decoded d = Decode(f, gray, png_direct);
        sink += d.ok ? d.pixels.data[0] : 0;
      }
      (png_direct ? served : libpng) += Clock::now() - start;
    }
  }
  const double n = static_cast<double>(repeat) * static_cast<double>(files.size());
  const double served_us = std::chrono::duration<double, std::micro>(served).count() / n;
  const double libpng_us = std::chrono::duration<double, std::micro>(libpng).count() / n;
  std::printf("{\"files\":%zu,\"direct\":%d,\"differ\":%d,\"served_us\":%.3f,"
              "\"libpng_us\":%.3f,\"speedup\":%.3f,\"sink\":%.0f}\n",
              files.size(), direct, differ, served_us, libpng_us, libpng_us / served_us, sink);
  return differ == 0 ? 0 : 1;
}
