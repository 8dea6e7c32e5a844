// The two encoded formats the APIs accept, PNG and JPEG, read through libpng and
// libjpeg-turbo themselves rather than cv::imdecode (and the commonest PNGs through
// png_direct.h, which reads them exactly as libpng would and leaves it the rest). The
// reasons are contracts imdecode cannot give: (1) only these two formats are ever
// attempted (imdecode also tries BMP, TIFF, WebP, EXR, PGM... whose declared sizes nobody
// checks before it allocates); (2) the size that is checked is exactly the size that would
// be decoded: a JPEG's from libjpeg's own header parse (a hand-written reader can be misled
// by a stray byte the library skips), a PNG's from the IHDR chunk libpng requires first,
// CRC and fields checked as libpng checks them; (3) a JPEG much larger than the model needs
// is decoded at 1/2, 1/4 or 1/8 scale by the library's DCT scaling, never at full size;
// (4) the libraries' warnings and errors become the returned status instead of lines on
// stderr. Pure functions, thread-safe; nothing is allocated for pixels before the size is
// known.
#pragma once

#include <optional>
#include <string_view>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "server/common/image_size.h"

namespace gatescope {

enum class ImageFormat { kPng, kJpeg };

// The format the bytes' signature names; nullopt for anything else.
std::optional<ImageFormat> SniffImageFormat(std::string_view bytes);

struct ImageHeader {
  ImageFormat format;
  ImageSize size;  // as declared: what a full decode would produce
};

// Reads the header only (no pixel buffer); a PNG's from its IHDR chunk when that is valid
// (png_direct.h), otherwise (and a JPEG's always) through the library. INVALID_ARGUMENT
// for a format other than PNG or JPEG, an unreadable or truncated header, or an image
// format variant decoding refuses (JPEG in CMYK/YCCK).
absl::StatusOr<ImageHeader> ReadImageHeader(std::string_view bytes);

// The declared size when ReadImageHeader succeeds; nullopt otherwise.
std::optional<ImageSize> DeclaredImageSize(std::string_view bytes);

struct DecodeRequest {
  bool gray = false;  // one channel (luma) instead of RGB
  // When both sides are positive, a JPEG is decoded at the smallest scale 1/2, 1/4 or 1/8
  // whose sides are still at least these (the pixels a model resizing to this size can
  // use); zero: full size. PNG has no scaled decoding and is always decoded at full size.
  ImageSize at_least;
  // False: every PNG goes through libpng, the reference the direct reader (png_direct.h)
  // is tested and fuzzed against. True: the PNGs that reader takes skip libpng.
  bool png_direct = true;
};

// Decodes `bytes`, whose header is `header` (from ReadImageHeader on the same bytes; the
// caller has checked its size), into 8-bit pixels: CV_8UC1 for gray, CV_8UC3 in RGB order
// otherwise. Alpha is dropped, palettes expanded, 16-bit samples reduced to 8 bits and
// colour turned to gray with the weights 0.299/0.587/0.114, as OpenCV's own decoders do.
// INVALID_ARGUMENT with the library's message for corrupt data.
absl::StatusOr<cv::Mat> DecodeImagePixels(std::string_view bytes, const ImageHeader& header,
                                          const DecodeRequest& request);

}  // namespace gatescope
