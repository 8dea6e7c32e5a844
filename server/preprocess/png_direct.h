// The PNGs clients send most (8-bit gray, gray + alpha, RGB or RGBA, not interlaced) read
// without libpng, the whole image inflated in one zlib call.
//
// Why: libpng inflates a row at a time, and zlib's fast inflate loop needs at least 258
// bytes of room, so every row narrower than that (each row of a 28 x 28 image) goes
// through zlib's slow byte-at-a-time loop; with its per-call set-up, libpng took about
// 6 us per Fashion-MNIST PNG and zlib was a fifth of the server's CPU per request on the
// request-path benchmark (docs/performance.md, "PNG inputs without libpng"). One call with
// room for the whole image runs zlib's fast loop. Only the container's walk, the five row
// filters and dropping alpha are done here; the DEFLATE stream and its checksums are
// zlib's, libpng's own inflater, so exactly the same streams are valid. (libdeflate, faster
// still, accepts codes zlib refuses, such as length symbols 286-287.)
//
// Contract: these functions answer only for files they can read exactly as libpng would.
// For anything else, however unusual (a CRC mismatch, a stray chunk, a palette, 16-bit or
// interlaced data, an RGB image asked for as gray, trailing compressed data, a stream
// declaring a window smaller than both 32 KiB and the image, which libpng's row-at-a-time
// inflate holds it to), they return nullopt and the caller goes to libpng, which decodes
// it or says what is wrong. Pure functions, thread-safe; each thread keeps one zlib
// inflater (about 7 KB, plus a window of up to 32 KiB after a stream that did not end).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <opencv2/core/mat.hpp>

namespace gatescope {

// The IHDR chunk: always the first, right after the signature.
struct PngHeader {
  uint32_t width = 0, height = 0;
  uint8_t bit_depth = 0, colour_type = 0, interlace = 0;
};

// The IHDR of `bytes` when the signature, the chunk's length, type and CRC, and every field
// are valid and the sides within libpng's default limit (1,000,000); nullopt otherwise.
std::optional<PngHeader> ReadPngHeader(std::string_view bytes);

// True when `bytes` has a valid IHDR (ReadPngHeader) and all its IDAT payloads together
// could not inflate, at DEFLATE's best ratio (1032:1), to the pixels that header declares:
// no reader can decode it (libpng says "Not enough image data" after allocating the image),
// so it is refused before any pixel memory is allocated. Chunk CRCs are not checked here.
bool PngDataTooShort(std::string_view bytes);

// The pixels of `bytes`: CV_8UC1 when `gray` (only from gray sources), CV_8UC3 in RGB order
// otherwise, alpha dropped and gray replicated, as libpng's transformations in
// image_codec.cc give them. Every chunk's CRC, the stream's Adler-32 and its exact length
// are checked. Memory: the whole inflated image (height x (1 + width x channels) bytes,
// about twice the output for gray + alpha read as gray) beside the output, where libpng
// holds two rows; the caller has checked the header's size first (at most 16 Mi pixels).
// nullopt: use libpng (see the contract).
std::optional<cv::Mat> DecodePngDirect(std::string_view bytes, bool gray);

}  // namespace gatescope
