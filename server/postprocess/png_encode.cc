#include "server/postprocess/png_encode.h"

// libpng reports errors by longjmp. The one function below that calls setjmp holds only
// trivially destructible locals and takes its C++ objects (the writer, the output string
// with its capacity reserved) from its caller, which creates them before and destroys them
// after: no destructor is ever skipped, and nothing it changes after setjmp is read after
// a longjmp.
#include <png.h>
#include <zlib.h>

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"

#ifndef PNG_WRITE_CUSTOMIZE_COMPRESSION_SUPPORTED
#error "the PNG writer needs libpng's compression settings (level, strategy)"
#endif

namespace gatescope {
namespace {

struct PngSink {
  std::string bytes;  // reserved to PngSizeBound before writing: appending never allocates
  char message[256] = "";
};

[[noreturn]] void PngFail(png_structp png, png_const_charp message) {
  auto* sink = static_cast<PngSink*>(png_get_error_ptr(png));
  std::snprintf(sink->message, sizeof sink->message, "%s", message);
  png_longjmp(png, 1);
}

void PngQuiet(png_structp, png_const_charp) {}  // warnings: the status is the only report

void PngWrite(png_structp png, png_bytep data, size_t length) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  if (length > sink->bytes.capacity() - sink->bytes.size()) {
    png_error(png, "PNG exceeds its size bound");
  }
  sink->bytes.append(reinterpret_cast<const char*>(data), length);
}

void PngFlush(png_structp) {}

// The PNG colour type that stores an OpenCV 8-bit image of `channels` (with png_set_bgr
// for 3 and 4); nullopt for a channel count PNG cannot take.
std::optional<int> ColourTypeFor(int channels) {
  switch (channels) {
    case 1:
      return PNG_COLOR_TYPE_GRAY;
    case 3:
      return PNG_COLOR_TYPE_RGB;
    case 4:
      return PNG_COLOR_TYPE_RGB_ALPHA;
    default:
      return std::nullopt;
  }
}

// An upper bound on the PNG's size: the filtered rows stored in zlib's worst case
// (deflateBound's arithmetic) plus every chunk's framing, in 64 bits.
size_t PngSizeBound(const cv::Mat& image) {
  const uint64_t filtered = static_cast<uint64_t>(image.rows) *
                            (static_cast<uint64_t>(image.cols) * image.channels() + 1);
  const uint64_t deflated = filtered + (filtered + 7) / 8 + (filtered + 63) / 64 + 11;
  return static_cast<size_t>(deflated + 12 * (deflated / PNG_ZBUF_SIZE + 1) + 1024);
}

// Writes `image` (checked by the caller) through `png`. False (with the sink's message)
// on a library error.
bool PngWriteImage(png_structp png, png_infop info, const cv::Mat& image, int colour_type) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.cols),
               static_cast<png_uint_32>(image.rows), 8, colour_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
  // cv::imencode's defaults for PNG, so pictures cost what they did: the SUB filter and
  // zlib's fastest level with run-length matching (libpng's defaults, adaptive filtering
  // at level 6, took 4-14x longer on heatmap-like pictures for 10-20 % fewer bytes).
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  png_set_compression_level(png, Z_BEST_SPEED);
  png_set_compression_strategy(png, Z_RLE);
  png_write_info(png, info);
  if (image.channels() > 1) png_set_bgr(png);
  for (int r = 0; r < image.rows; ++r) png_write_row(png, image.ptr<png_byte>(r));
  png_write_end(png, info);
  return true;
}

}  // namespace

absl::StatusOr<std::string> EncodePng(const cv::Mat& image) {
  const std::optional<int> colour_type = ColourTypeFor(image.channels());
  if (image.empty() || image.dims != 2 || image.depth() != CV_8U || !colour_type.has_value() ||
      image.rows > PNG_USER_HEIGHT_MAX || image.cols > PNG_USER_WIDTH_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("PNG encoding takes a non-empty 8-bit image of 1, 3 or 4 channels and "
                     "sides up to ", PNG_USER_WIDTH_MAX, ", not ", image.rows, "x", image.cols,
                     " of type ", image.type()));
  }
  PngSink sink;
  sink.bytes.reserve(PngSizeBound(image));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, PngFail, PngQuiet);
  png_infop info = png != nullptr ? png_create_info_struct(png) : nullptr;
  const bool created = info != nullptr;
  bool written = false;
  if (created) {
    png_set_write_fn(png, &sink, PngWrite, PngFlush);
    written = PngWriteImage(png, info, image, *colour_type);
  }
  png_destroy_write_struct(&png, created ? &info : nullptr);
  if (!created) return absl::InternalError("no memory for a PNG writer");
  if (!written) return absl::InternalError(absl::StrCat("PNG encoding failed: ", sink.message));
  sink.bytes.shrink_to_fit();
  return std::move(sink.bytes);
}

}  // namespace gatescope
