#include "server/preprocess/png_direct.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <zlib.h>

namespace gatescope {
namespace {

constexpr std::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
constexpr uint32_t kMaxChunkLength = 0x7FFFFFFF;  // the format's bound
constexpr uint32_t kMaxSide = 1000000;            // libpng's default user limit
constexpr size_t kChunkOverhead = 12;             // length, type, CRC
// DEFLATE's most output per input byte (a 258-byte match in about two bits, at best).
constexpr size_t kMaxDeflateRatio = 1032;

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

bool IsLetter(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

// One chunk of the file: `data` views its payload.
struct Chunk {
  char type[4];
  std::string_view data;
};

// The chunk at `at` (advanced past it) when it fits in `bytes`, its type is four letters
// and its CRC matches; nullopt otherwise.
std::optional<Chunk> NextChunk(std::string_view bytes, size_t& at) {
  if (bytes.size() - at < kChunkOverhead) return std::nullopt;
  const unsigned char* p = Bytes(bytes) + at;
  const uint32_t length = BigEndian32(p);
  if (length > kMaxChunkLength || length > bytes.size() - at - kChunkOverhead) {
    return std::nullopt;
  }
  for (int i = 4; i < 8; ++i) {
    if (!IsLetter(p[i])) return std::nullopt;
  }
  const uLong crc = crc32(0, p + 4, static_cast<uInt>(length) + 4);
  if (crc != BigEndian32(p + 8 + length)) return std::nullopt;
  Chunk chunk;
  std::memcpy(chunk.type, p + 4, 4);
  chunk.data = bytes.substr(at + 8, length);
  at += kChunkOverhead + length;
  return chunk;
}

bool Is(const Chunk& chunk, const char (&type)[5]) { return std::memcmp(chunk.type, type, 4) == 0; }

// Bytes per pixel of an 8-bit image of `colour_type`; 0 for the types not read here
// (palette) and invalid ones.
int Channels(uint8_t colour_type) {
  switch (colour_type) {
    case 0: return 1;  // gray
    case 2: return 3;  // RGB
    case 4: return 2;  // gray + alpha
    case 6: return 4;  // RGBA
    default: return 0;
  }
}

bool ValidDepth(uint8_t colour_type, uint8_t depth) {
  switch (colour_type) {
    case 0: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case 3: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case 2:
    case 4:
    case 6: return depth == 8 || depth == 16;
    default: return false;
  }
}

// The concatenated payload of consecutive IDAT chunks, from the chunk after IHDR to IEND.
// nullopt when the file has anything libpng treats other than by skipping it: a second
// IHDR, a PLTE (refused in gray files, unused in colour ones: left to libpng either way),
// an unknown critical chunk, IDATs not in one run, none at all, a non-empty IEND, or no
// IEND. Ancillary chunks are skipped, as libpng skips them when no transformation asks for
// them. `joined` holds the payload when there are several IDATs.
std::optional<std::string_view> ImageData(std::string_view bytes, std::string& joined) {
  size_t at = kSignature.size() + kChunkOverhead + 13;  // after IHDR
  std::string_view first;
  int idats = 0;
  bool idat_run_over = false;
  while (true) {
    const std::optional<Chunk> chunk = NextChunk(bytes, at);
    if (!chunk) return std::nullopt;
    if (Is(*chunk, "IDAT")) {
      if (idat_run_over) return std::nullopt;
      if (++idats == 1) {
        first = chunk->data;
      } else {
        if (idats == 2) joined.assign(first);
        joined.append(chunk->data);
      }
      continue;
    }
    if (idats > 0) idat_run_over = true;
    if (Is(*chunk, "IEND")) {
      if (idats == 0 || !chunk->data.empty()) return std::nullopt;
      return idats == 1 ? first : std::string_view(joined);
    }
    const bool critical = (chunk->type[0] & 0x20) == 0;
    if (critical) return std::nullopt;  // IHDR, PLTE or unknown
  }
}

// This thread's inflater (zlib's state allocated once per thread, reset for each image with
// windowBits 0: the window each stream's header declares, as libpng resets it); null if
// zlib had no memory. A stream inflated to its end in one call needs no window buffer.
z_stream* ThreadInflater() {
  struct Inflater {
    z_stream stream{};
    bool ready = inflateInit2(&stream, 0) == Z_OK;
    ~Inflater() {
      if (ready) inflateEnd(&stream);
    }
  };
  thread_local Inflater inflater;
  return inflater.ready ? &inflater.stream : nullptr;
}

int Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Undoes the filter of `row` (its filter byte first) in place, given the previous row
// already unfiltered (`above`, null for the first row). False for an unknown filter.
bool Unfilter(unsigned char* row, const unsigned char* above, size_t row_bytes, int bpp) {
  const unsigned char filter = row[0];
  unsigned char* x = row + 1;
  const unsigned char* b = above != nullptr ? above + 1 : nullptr;
  switch (filter) {
    case 0: return true;
    case 1:
      for (size_t i = bpp; i < row_bytes; ++i) x[i] = static_cast<unsigned char>(x[i] + x[i - bpp]);
      return true;
    case 2:
      if (b == nullptr) return true;
      for (size_t i = 0; i < row_bytes; ++i) x[i] = static_cast<unsigned char>(x[i] + b[i]);
      return true;
    case 3:
      for (size_t i = 0; i < row_bytes; ++i) {
        const int left = i >= static_cast<size_t>(bpp) ? x[i - bpp] : 0;
        const int up = b != nullptr ? b[i] : 0;
        x[i] = static_cast<unsigned char>(x[i] + ((left + up) >> 1));
      }
      return true;
    case 4:
      for (size_t i = 0; i < row_bytes; ++i) {
        const bool has_left = i >= static_cast<size_t>(bpp);
        const int left = has_left ? x[i - bpp] : 0;
        const int up = b != nullptr ? b[i] : 0;
        const int up_left = has_left && b != nullptr ? b[i - bpp] : 0;
        x[i] = static_cast<unsigned char>(x[i] + Paeth(left, up, up_left));
      }
      return true;
    default: return false;
  }
}

// Writes one unfiltered source row (`channels` per pixel) into `out` (1 or 3 per pixel):
// the gray or RGB samples, alpha dropped, gray replicated for RGB output.
void ConvertRow(const unsigned char* in, int channels, unsigned char* out, uint32_t width,
                bool gray) {
  if ((gray && channels == 1) || (!gray && channels == 3)) {
    std::memcpy(out, in, size_t{width} * channels);
    return;
  }
  for (uint32_t i = 0; i < width; ++i) {
    const unsigned char* pixel = in + size_t{i} * channels;
    if (gray) {
      out[i] = pixel[0];  // gray + alpha
    } else if (channels <= 2) {
      out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = pixel[0];  // gray, gray + alpha
    } else {
      std::memcpy(out + 3 * size_t{i}, pixel, 3);  // RGBA
    }
  }
}

// Bits per pixel of a valid IHDR's colour type and depth.
int BitsPerPixel(const PngHeader& header) {
  const int samples = header.colour_type == 3 ? 1 : Channels(header.colour_type);
  return samples * header.bit_depth;
}

}  // namespace

std::optional<PngHeader> ReadPngHeader(std::string_view bytes) {
  if (bytes.substr(0, kSignature.size()) != kSignature) return std::nullopt;
  size_t at = kSignature.size();
  const std::optional<Chunk> ihdr = NextChunk(bytes, at);
  if (!ihdr || !Is(*ihdr, "IHDR") || ihdr->data.size() != 13) return std::nullopt;
  const unsigned char* f = Bytes(ihdr->data);
  PngHeader header;
  header.width = BigEndian32(f);
  header.height = BigEndian32(f + 4);
  header.bit_depth = f[8];
  header.colour_type = f[9];
  header.interlace = f[12];
  const bool compression_and_filter_methods_known = f[10] == 0 && f[11] == 0;
  if (header.width == 0 || header.height == 0 || header.width > kMaxSide ||
      header.height > kMaxSide || !ValidDepth(header.colour_type, header.bit_depth) ||
      !compression_and_filter_methods_known || header.interlace > 1) {
    return std::nullopt;
  }
  return header;
}

bool PngDataTooShort(std::string_view bytes) {
  const std::optional<PngHeader> header = ReadPngHeader(bytes);
  if (!header) return false;
  uint64_t idat_bytes = 0;
  size_t at = kSignature.size();
  while (bytes.size() - at >= kChunkOverhead) {
    const unsigned char* p = Bytes(bytes) + at;
    const uint64_t length = BigEndian32(p);
    if (length > bytes.size() - at - kChunkOverhead) break;
    if (std::memcmp(p + 4, "IDAT", 4) == 0) idat_bytes += length;
    at += kChunkOverhead + length;
  }
  // Every pixel's bits, without the rows' filter bytes or padding: less than any reader
  // inflates, interlaced or not.
  const uint64_t pixel_bytes =
      uint64_t{header->width} * header->height * BitsPerPixel(*header) / 8;
  return idat_bytes * kMaxDeflateRatio < pixel_bytes;
}

std::optional<cv::Mat> DecodePngDirect(std::string_view bytes, bool gray) {
  const std::optional<PngHeader> header = ReadPngHeader(bytes);
  if (!header || header->bit_depth != 8 || header->interlace != 0) return std::nullopt;
  const int channels = Channels(header->colour_type);
  if (channels == 0 || (gray && channels > 2)) return std::nullopt;  // RGB to gray: libpng's
  std::string joined;
  const std::optional<std::string_view> data = ImageData(bytes, joined);
  if (!data) return std::nullopt;
  z_stream* inflater = ThreadInflater();
  if (inflater == nullptr || inflateReset2(inflater, 0) != Z_OK) return std::nullopt;

  const size_t row_bytes = size_t{header->width} * channels;
  const size_t stride = row_bytes + 1;  // each row starts with its filter byte
  const size_t inflated = stride * header->height;
  // A header declaring more rows than its data could ever inflate to allocates nothing here.
  if (inflated / kMaxDeflateRatio > data->size()) return std::nullopt;
  if (inflated > UINT32_MAX || data->size() > UINT32_MAX) return std::nullopt;  // uInt counts
  // libpng inflates with the window the stream's header declares, a row at a time, so a
  // stream reaching back further than its declared window fails there; one call over the
  // whole image would not. Only streams that cannot do that are read here: a 32 KiB window
  // (DEFLATE's farthest reach) or a window covering the whole image.
  if (data->empty()) return std::nullopt;
  const int window_log = (static_cast<unsigned char>((*data)[0]) >> 4) + 8;
  const bool window_covers = window_log == 15 || inflated <= (size_t{1} << window_log);
  if (window_log > 15 || !window_covers) return std::nullopt;
  std::unique_ptr<unsigned char[]> rows(new unsigned char[inflated]);
  inflater->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data->data()));
  inflater->avail_in = static_cast<uInt>(data->size());
  inflater->next_out = rows.get();
  inflater->avail_out = static_cast<uInt>(inflated);
  // The same zlib as libpng's, so the same streams are valid. Exactly the image's rows from
  // exactly the IDAT payload, checksum included; libpng decides anything else.
  const int result = inflate(inflater, Z_FINISH);
  if (result != Z_STREAM_END || inflater->avail_in != 0 || inflater->avail_out != 0) {
    return std::nullopt;
  }

  cv::Mat pixels(static_cast<int>(header->height), static_cast<int>(header->width),
                 gray ? CV_8UC1 : CV_8UC3);
  const unsigned char* above = nullptr;
  for (uint32_t r = 0; r < header->height; ++r) {
    unsigned char* row = rows.get() + size_t{r} * stride;
    if (!Unfilter(row, above, row_bytes, channels)) return std::nullopt;
    ConvertRow(row + 1, channels, pixels.ptr<unsigned char>(static_cast<int>(r)),
               header->width, gray);
    above = row;
  }
  return pixels;
}

}  // namespace gatescope
