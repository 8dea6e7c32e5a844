#include "server/preprocess/image_codec.h"

// Both libraries report errors by longjmp. Every function below that calls setjmp holds
// only trivially destructible locals and takes C++ objects (pixel buffers, row tables)
// from its caller, which creates them before and destroys them after: no destructor is
// ever skipped and no non-volatile local changes between setjmp and longjmp.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include <jpeglib.h>
#include <png.h>

#include "absl/strings/str_cat.h"
#include "server/preprocess/png_direct.h"

namespace gatescope {
namespace {

constexpr std::string_view kPngSignature("\x89PNG\r\n\x1a\n", 8);

absl::Status Corrupt(const char* format, const char* message) {
  return absl::InvalidArgumentError(absl::StrCat(format, " could not be decoded: ", message));
}

// ---------------------------------------------------------------------------------- JPEG

struct JpegErrors {
  jpeg_error_mgr manager;  // first: libjpeg sees a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JpegFail(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (e.g. extraneous bytes, a truncated scan) are not printed: the request's status
// is the only report, and a decodable image is still decoded as OpenCV would.
void JpegQuiet(j_common_ptr, int) {}

struct JpegOutput {
  JDIMENSION width = 0, height = 0;
  int channels = 0;
};

// Reads the header and, when `request` is set, chooses the output colour and scale.
// False (with errors->message) on a library error.
bool JpegStart(jpeg_decompress_struct* info, JpegErrors* errors, const unsigned char* data,
               size_t size, const DecodeRequest* request, JpegOutput* out) {
  if (setjmp(errors->jump)) return false;
  jpeg_mem_src(info, data, static_cast<unsigned long>(size));
  jpeg_read_header(info, TRUE);
  if (info->jpeg_color_space == JCS_CMYK || info->jpeg_color_space == JCS_YCCK) {
    std::snprintf(errors->message, sizeof errors->message, "CMYK JPEG is not supported");
    return false;
  }
  out->width = info->image_width;
  out->height = info->image_height;
  if (request == nullptr) return true;
  info->out_color_space = request->gray ? JCS_GRAYSCALE : JCS_RGB;
  info->scale_num = 1;
  info->scale_denom = 1;
  const ImageSize want = request->at_least;
  if (want.height > 0 && want.width > 0) {
    for (unsigned denom : {8u, 4u, 2u}) {
      const int64_t h = (static_cast<int64_t>(info->image_height) + denom - 1) / denom;
      const int64_t w = (static_cast<int64_t>(info->image_width) + denom - 1) / denom;
      if (h >= want.height && w >= want.width) {
        info->scale_denom = denom;
        break;
      }
    }
  }
  jpeg_calc_output_dimensions(info);
  out->width = info->output_width;
  out->height = info->output_height;
  out->channels = info->out_color_components;
  return true;
}

bool JpegCreate(jpeg_decompress_struct* info, JpegErrors* errors) {
  if (setjmp(errors->jump)) return false;
  jpeg_create_decompress(info);
  return true;
}

bool JpegPixels(jpeg_decompress_struct* info, JpegErrors* errors, unsigned char* pixels,
                size_t row_bytes) {
  if (setjmp(errors->jump)) return false;
  jpeg_start_decompress(info);
  while (info->output_scanline < info->output_height) {
    JSAMPROW row = pixels + static_cast<size_t>(info->output_scanline) * row_bytes;
    jpeg_read_scanlines(info, &row, 1);
  }
  jpeg_finish_decompress(info);
  return true;
}

// Owns a decompressor for one call.
class Jpeg {
 public:
  Jpeg() {
    info_.err = jpeg_std_error(&errors_.manager);
    errors_.manager.error_exit = JpegFail;
    errors_.manager.emit_message = JpegQuiet;
    errors_.message[0] = '\0';
    created_ = JpegCreate(&info_, &errors_);
  }
  ~Jpeg() {
    if (created_) jpeg_destroy_decompress(&info_);
  }
  Jpeg(const Jpeg&) = delete;
  Jpeg& operator=(const Jpeg&) = delete;

  absl::StatusOr<JpegOutput> Start(std::string_view bytes, const DecodeRequest* request) {
    if (!created_) return absl::ResourceExhaustedError("no memory for a JPEG decoder");
    JpegOutput out;
    if (!JpegStart(&info_, &errors_, reinterpret_cast<const unsigned char*>(bytes.data()),
                   bytes.size(), request, &out)) {
      return Corrupt("JPEG", errors_.message);
    }
    return out;
  }

  absl::Status Pixels(cv::Mat& pixels) {
    if (!JpegPixels(&info_, &errors_, pixels.data, pixels.step[0])) {
      return Corrupt("JPEG", errors_.message);
    }
    return absl::OkStatus();
  }

 private:
  jpeg_decompress_struct info_;
  JpegErrors errors_;
  bool created_ = false;
};

// ----------------------------------------------------------------------------------- PNG

struct PngErrors {
  char message[256];
};

[[noreturn]] void PngFail(png_structp png, png_const_charp message) {
  auto* errors = static_cast<PngErrors*>(png_get_error_ptr(png));
  std::snprintf(errors->message, sizeof errors->message, "%s", message);
  png_longjmp(png, 1);
}

void PngQuiet(png_structp, png_const_charp) {}  // warnings: see JpegQuiet

struct PngSource {
  const unsigned char* data;
  size_t size;
  size_t at;
};

void PngRead(png_structp png, png_bytep into, size_t length) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (length > source->size - source->at) png_error(png, "the data is truncated");
  std::memcpy(into, source->data + source->at, length);
  source->at += length;
}

struct PngOutput {
  png_uint_32 width = 0, height = 0;
  int channels = 0;
  size_t row_bytes = 0;
};

// Reads the header and, when `request` is set, sets the transformations to 8-bit gray or
// RGB without alpha (OpenCV's, minus its BGR order).
bool PngStart(png_structp png, png_infop info, const DecodeRequest* request, PngOutput* out) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  out->width = png_get_image_width(png, info);
  out->height = png_get_image_height(png, info);
  if (request == nullptr) return true;
  const int depth = png_get_bit_depth(png, info);
  const int type = png_get_color_type(png, info);
  if (depth == 16) png_set_strip_16(png);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if ((type & PNG_COLOR_MASK_COLOR) == 0 && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  const bool colour = (type & PNG_COLOR_MASK_COLOR) != 0;
  if (request->gray && colour) png_set_rgb_to_gray(png, 1, 0.299, 0.587);
  if (!request->gray && !colour) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->channels = png_get_channels(png, info);
  out->row_bytes = png_get_rowbytes(png, info);
  return true;
}

bool PngPixels(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, info);
  return true;
}

// Owns a reader for one call.
class Png {
 public:
  explicit Png(std::string_view bytes)
      : source_{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), 0} {
    errors_.message[0] = '\0';
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, &errors_, PngFail, PngQuiet);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
    if (info_ != nullptr) png_set_read_fn(png_, &source_, PngRead);
  }
  ~Png() {
    if (png_ != nullptr) png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr);
  }
  Png(const Png&) = delete;
  Png& operator=(const Png&) = delete;

  absl::StatusOr<PngOutput> Start(const DecodeRequest* request) {
    if (info_ == nullptr) return absl::ResourceExhaustedError("no memory for a PNG reader");
    PngOutput out;
    if (!PngStart(png_, info_, request, &out)) return Corrupt("PNG", errors_.message);
    return out;
  }

  absl::Status Pixels(cv::Mat& pixels) {
    std::vector<png_bytep> rows(static_cast<size_t>(pixels.rows));
    for (int r = 0; r < pixels.rows; ++r) rows[r] = pixels.ptr<unsigned char>(r);
    if (!PngPixels(png_, info_, rows.data())) return Corrupt("PNG", errors_.message);
    return absl::OkStatus();
  }

 private:
  PngSource source_;
  PngErrors errors_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

absl::Status Unsupported() {
  return absl::InvalidArgumentError("image is neither PNG nor JPEG (the formats accepted)");
}

// OK when the decoder agrees with the header the caller checked: the same size (a JPEG's
// at most, when scaled) and the requested channels.
absl::Status CheckDecodedSize(int64_t height, int64_t width, int channels,
                              const ImageHeader& header, const DecodeRequest& request) {
  const bool scaled = request.at_least.height > 0 && request.at_least.width > 0 &&
                      header.format == ImageFormat::kJpeg;
  const bool fits = scaled ? height <= header.size.height && width <= header.size.width
                           : height == header.size.height && width == header.size.width;
  if (!fits || channels != (request.gray ? 1 : 3)) {
    return absl::InvalidArgumentError("image header changed between reads");
  }
  return absl::OkStatus();
}

// The output buffer for `height` x `width` x `channels`, after CheckDecodedSize.
absl::StatusOr<cv::Mat> OutputBuffer(int64_t height, int64_t width, int channels,
                                     const ImageHeader& header, const DecodeRequest& request) {
  if (absl::Status st = CheckDecodedSize(height, width, channels, header, request); !st.ok()) {
    return st;
  }
  return cv::Mat(static_cast<int>(height), static_cast<int>(width),
                 request.gray ? CV_8UC1 : CV_8UC3);
}

}  // namespace

std::optional<ImageFormat> SniffImageFormat(std::string_view bytes) {
  if (bytes.substr(0, kPngSignature.size()) == kPngSignature) return ImageFormat::kPng;
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
      static_cast<unsigned char>(bytes[1]) == 0xD8 &&
      static_cast<unsigned char>(bytes[2]) == 0xFF) {
    return ImageFormat::kJpeg;
  }
  return std::nullopt;
}

absl::StatusOr<ImageHeader> ReadImageHeader(std::string_view bytes) {
  const std::optional<ImageFormat> format = SniffImageFormat(bytes);
  if (!format) return Unsupported();
  if (*format == ImageFormat::kJpeg) {
    Jpeg jpeg;
    absl::StatusOr<JpegOutput> out = jpeg.Start(bytes, nullptr);
    if (!out.ok()) return out.status();
    return ImageHeader{*format, {out->height, out->width}};
  }
  // libpng reads the same IHDR first and refuses the file if it is not valid (which
  // ReadPngHeader checks), so both give the same size.
  if (const std::optional<PngHeader> ihdr = ReadPngHeader(bytes)) {
    return ImageHeader{*format, {ihdr->height, ihdr->width}};
  }
  Png png(bytes);
  absl::StatusOr<PngOutput> out = png.Start(nullptr);
  if (!out.ok()) return out.status();
  return ImageHeader{*format, {out->height, out->width}};
}

std::optional<ImageSize> DeclaredImageSize(std::string_view bytes) {
  absl::StatusOr<ImageHeader> header = ReadImageHeader(bytes);
  if (!header.ok()) return std::nullopt;
  return header->size;
}

absl::StatusOr<cv::Mat> DecodeImagePixels(std::string_view bytes, const ImageHeader& header,
                                          const DecodeRequest& request) {
  if (header.format == ImageFormat::kJpeg) {
    Jpeg jpeg;
    absl::StatusOr<JpegOutput> out = jpeg.Start(bytes, &request);
    if (!out.ok()) return out.status();
    absl::StatusOr<cv::Mat> pixels =
        OutputBuffer(out->height, out->width, out->channels, header, request);
    if (!pixels.ok()) return pixels.status();
    if (absl::Status st = jpeg.Pixels(*pixels); !st.ok()) return st;
    return pixels;
  }
  if (PngDataTooShort(bytes)) {
    return Corrupt("PNG", "its image data is too short for its size");
  }
  if (request.png_direct) {
    if (std::optional<cv::Mat> direct = DecodePngDirect(bytes, request.gray)) {
      if (absl::Status st = CheckDecodedSize(direct->rows, direct->cols, direct->channels(),
                                             header, request);
          !st.ok()) {
        return st;
      }
      return *std::move(direct);
    }
  }
  Png png(bytes);
  absl::StatusOr<PngOutput> out = png.Start(&request);
  if (!out.ok()) return out.status();
  absl::StatusOr<cv::Mat> pixels =
      OutputBuffer(out->height, out->width, out->channels, header, request);
  if (!pixels.ok()) return pixels.status();
  if (out->row_bytes != pixels->step[0]) {
    return absl::InternalError("PNG rows do not have the expected size");
  }
  if (absl::Status st = png.Pixels(*pixels); !st.ok()) return st;
  return pixels;
}

}  // namespace gatescope
