#include "server/preprocess/png_direct.h"

#include <gtest/gtest.h>
#include <png.h>
#include <zlib.h>

#include <opencv2/core.hpp>

#include <csetjmp>
#include <string>
#include <vector>

#include "server/preprocess/image_codec.h"

namespace gatescope {
namespace {

// ------------------------------------------------------------------- writing test PNGs

// What libpng writes: any colour type, row filter, depth, interlacing, IDAT size and text.
struct Written {
  int colour_type = PNG_COLOR_TYPE_GRAY;
  int filters = PNG_ALL_FILTERS;
  int depth = 8;
  bool interlaced = false;
  size_t idat_bytes = 8192;    // the compression buffer: one IDAT per this many bytes
  bool text_around = false;    // tEXt chunks before and after the image data
  bool suggested_palette = false;  // a PLTE in an RGB file
};

int SamplesPerPixel(int colour_type) {
  switch (colour_type) {
    case PNG_COLOR_TYPE_GRAY: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
    default: return 1;  // palette indices
  }
}

// Texture that makes every filter type win somewhere: flat runs, gradients and noise (in
// which the Paeth predictor's ties, where its order of preference matters, occur).
unsigned Sample(int r, int c, int s) {
  if ((r / 4 + c / 5) % 3 == 0) return 17u * s;
  if ((r / 4 + c / 5) % 3 == 1) {
    return static_cast<unsigned>((r * 31 + c * 7 + s * 59 + ((r * c) % 13) * 11) % 256);
  }
  uint32_t h = (static_cast<uint32_t>(r) * 73856093u) ^ (static_cast<uint32_t>(c) * 19349663u) ^
               (static_cast<uint32_t>(s) * 83492791u);
  h *= 2654435761u;
  return h >> 24;
}

void AppendTo(png_structp png, png_bytep data, size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), length);
}

std::string WritePng(int height, int width, const Written& w) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    ADD_FAILURE() << "libpng could not write the test image";
    return "";
  }
  png_set_write_fn(png, &out, AppendTo, nullptr);
  png_set_IHDR(png, info, width, height, w.depth, w.colour_type,
               w.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, w.filters);
  png_set_compression_buffer_size(png, w.idat_bytes);
  std::vector<png_color> palette(256);
  for (int i = 0; i < 256; ++i) {
    palette[i] = {static_cast<png_byte>(i), static_cast<png_byte>(255 - i),
                  static_cast<png_byte>((i * 7) % 256)};
  }
  if (w.colour_type == PNG_COLOR_TYPE_PALETTE || w.suggested_palette) {
    png_set_PLTE(png, info, palette.data(), 256);
  }
  png_text before{};
  before.compression = PNG_TEXT_COMPRESSION_NONE;
  before.key = const_cast<char*>("Comment");
  before.text = const_cast<char*>("before the pixels");
  if (w.text_around) png_set_text(png, info, &before, 1);
  png_write_info(png, info);
  const int samples = SamplesPerPixel(w.colour_type);
  const int bytes_per_sample = w.depth == 16 ? 2 : 1;
  std::vector<std::vector<png_byte>> rows(height);
  std::vector<png_bytep> row_pointers(height);
  for (int r = 0; r < height; ++r) {
    rows[r].assign(static_cast<size_t>(width) * samples * bytes_per_sample + 1, 0);
    for (int c = 0; c < width; ++c) {
      for (int s = 0; s < samples; ++s) {
        const unsigned v = Sample(r, c, s);
        if (w.depth == 16) {
          rows[r][2 * (c * samples + s)] = static_cast<png_byte>(v);
          rows[r][2 * (c * samples + s) + 1] = static_cast<png_byte>(v * 3);
        } else if (w.depth < 8) {  // gray only: pack from the most significant bits
          const int per_byte = 8 / w.depth;
          const unsigned value = v >> (8 - w.depth);
          rows[r][c / per_byte] |=
              static_cast<png_byte>(value << (8 - w.depth * (1 + c % per_byte)));
        } else {
          rows[r][c * samples + s] = static_cast<png_byte>(v);
        }
      }
    }
    row_pointers[r] = rows[r].data();
  }
  png_write_image(png, row_pointers.data());
  png_text after = before;
  after.text = const_cast<char*>("after the pixels");
  if (w.text_around) png_set_text(png, info, &after, 1);
  png_write_end(png, w.text_around ? info : nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// -------------------------------------------------------- building PNGs chunk by chunk

std::string BigEndian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string Chunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size());
  return BigEndian(static_cast<uint32_t>(data.size())) + body +
         BigEndian(static_cast<uint32_t>(crc));
}

std::string Ihdr(uint32_t width, uint32_t height, char depth = 8, char colour_type = 0,
                 char compression = 0, char filter = 0, char interlace = 0) {
  return Chunk("IHDR", BigEndian(width) + BigEndian(height) +
                           std::string{depth, colour_type, compression, filter, interlace});
}

std::string Zlib(const std::string& raw) {
  uLongf size = compressBound(raw.size());
  std::string out(size, '\0');
  EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                      reinterpret_cast<const Bytef*>(raw.data()), raw.size(), 9),
            Z_OK);
  out.resize(size);
  return out;
}

const std::string kSignature("\x89PNG\r\n\x1a\n", 8);

// A 4 x 3 gray image: each row's filter byte, then four samples.
std::string GrayRows(char filter = 0) {
  std::string raw;
  for (int r = 0; r < 3; ++r) {
    raw += filter;
    for (int c = 0; c < 4; ++c) raw += static_cast<char>(r * 40 + c * 9);
  }
  return raw;
}

std::string Assemble(const std::vector<std::string>& chunks) {
  std::string png = kSignature;
  for (const std::string& c : chunks) png += c;
  return png;
}

// ------------------------------------------------------------------------- comparing

absl::StatusOr<cv::Mat> ThroughLibpng(const std::string& png, bool gray) {
  const absl::StatusOr<ImageHeader> header = ReadImageHeader(png);
  if (!header.ok()) return header.status();
  DecodeRequest request{gray, {}};
  request.png_direct = false;
  return DecodeImagePixels(png, *header, request);
}

void ExpectSamePixels(const cv::Mat& a, const cv::Mat& b) {
  ASSERT_EQ(a.type(), b.type());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
}

// What the server does with `png` (DecodeImagePixels, direct where it can) is exactly what
// libpng alone does: the same pixels, or an error for both.
void ExpectServedAsLibpng(const std::string& png, bool gray) {
  const absl::StatusOr<cv::Mat> reference = ThroughLibpng(png, gray);
  const absl::StatusOr<ImageHeader> header = ReadImageHeader(png);
  const absl::StatusOr<cv::Mat> served =
      header.ok() ? DecodeImagePixels(png, *header, {gray, {}}) : header.status();
  ASSERT_EQ(served.ok(), reference.ok()) << served.status() << " / " << reference.status();
  if (reference.ok()) ExpectSamePixels(*served, *reference);
}

// --------------------------------------------------------------------------- tests

// Every colour type read here, every row filter, one IDAT or many, text chunks on both
// sides of the pixels: the direct reader decodes each, exactly as libpng does.
TEST(PngDirect, DecodesWhatLibpngDecodes) {
  const int filters[] = {PNG_FILTER_NONE, PNG_FILTER_SUB, PNG_FILTER_UP, PNG_FILTER_AVG,
                         PNG_FILTER_PAETH, PNG_ALL_FILTERS};
  int decoded = 0;
  for (int colour : {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                     PNG_COLOR_TYPE_RGB_ALPHA}) {
    for (int filter : filters) {
      for (auto [h, w] : {std::pair{1, 1}, std::pair{28, 28}, std::pair{37, 53}}) {
        for (size_t idat : {size_t{8192}, size_t{64}}) {
          for (bool text : {false, true}) {
            Written spec;
            spec.colour_type = colour;
            spec.filters = filter;
            spec.idat_bytes = idat;
            spec.text_around = text;
            const std::string png = WritePng(h, w, spec);
            for (bool gray : {true, false}) {
              SCOPED_TRACE(testing::Message() << "colour " << colour << " filter " << filter
                                              << " " << h << "x" << w << " idat " << idat
                                              << " text " << text << " gray " << gray);
              const std::optional<cv::Mat> direct = DecodePngDirect(png, gray);
              const bool gray_source = (colour & PNG_COLOR_MASK_COLOR) == 0;
              ASSERT_EQ(direct.has_value(), !gray || gray_source);  // RGB to gray: libpng
              const absl::StatusOr<cv::Mat> reference = ThroughLibpng(png, gray);
              ASSERT_TRUE(reference.ok()) << reference.status();
              if (direct) {
                ExpectSamePixels(*direct, *reference);
                ++decoded;
              }
              ExpectServedAsLibpng(png, gray);
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(decoded, 6 * 3 * 2 * 2 * (2 + 2 + 1 + 1));
}

// The header comes from IHDR alone, and agrees with libpng's read of it.
TEST(PngDirect, HeaderIsLibpngs) {
  Written spec;
  spec.colour_type = PNG_COLOR_TYPE_RGB;
  spec.interlaced = true;
  const std::string png = WritePng(37, 53, spec);
  const std::optional<PngHeader> header = ReadPngHeader(png);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->height, 37u);
  EXPECT_EQ(header->width, 53u);
  EXPECT_EQ(header->colour_type, PNG_COLOR_TYPE_RGB);
  EXPECT_EQ(header->interlace, 1);
  const absl::StatusOr<ImageHeader> image = ReadImageHeader(png);
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->size, (ImageSize{37, 53}));

  // Invalid fields, a stale CRC, a side over libpng's limit: no header of ours.
  const std::string rows = Chunk("IDAT", Zlib(GrayRows())) + Chunk("IEND", "");
  EXPECT_TRUE(ReadPngHeader(Assemble({Ihdr(4, 3), rows})).has_value());
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(4, 3, 3, 0), rows})));   // depth 3
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(4, 3, 8, 5), rows})));   // colour type 5
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(4, 3, 4, 2), rows})));   // RGB at 4 bits
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(0, 3), rows})));          // empty
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(1000001, 3), rows})));    // over the limit
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(4, 1000001), rows})));
  EXPECT_TRUE(ReadPngHeader(Assemble({Ihdr(1000000, 1000000), rows})).has_value());
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(4, 3, 8, 0, 1, 0, 0), rows})));  // compression 1
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(4, 3, 8, 0, 0, 1, 0), rows})));  // filter method 1
  EXPECT_FALSE(ReadPngHeader(Assemble({Ihdr(4, 3, 8, 0, 0, 0, 2), rows})));  // interlace 2
  for (const std::string& refused :
       {Assemble({Ihdr(4, 3, 8, 0, 0, 0, 2), rows}), Assemble({Ihdr(4, 1000001), rows})}) {
    EXPECT_FALSE(ReadImageHeader(refused).ok());  // and libpng refuses them too
  }
  std::string stale = Assemble({Ihdr(4, 3), rows});
  stale[19] = 9;  // width 4 -> 9 with the CRC unchanged
  EXPECT_FALSE(ReadPngHeader(stale));
  EXPECT_FALSE(ReadPngHeader(Assemble({Chunk("tEXt", "a"), Ihdr(4, 3), rows})));  // not first
  EXPECT_FALSE(ReadPngHeader(kSignature + Ihdr(4, 3).substr(0, 20)));  // truncated
}

// Files the direct reader leaves to libpng, and which are still served as libpng serves
// them: other depths, palettes, interlacing, RGB read as gray.
TEST(PngDirect, LeavesOtherKindsToLibpng) {
  struct Case {
    const char* what;
    Written spec;
  };
  std::vector<Case> cases;
  Written s;
  s.depth = 16;
  s.colour_type = PNG_COLOR_TYPE_RGB;
  cases.push_back({"16-bit RGB", s});
  for (int depth : {1, 2, 4}) {
    s = Written{};
    s.depth = depth;
    cases.push_back({"low-depth gray", s});
  }
  s = Written{};
  s.colour_type = PNG_COLOR_TYPE_PALETTE;
  cases.push_back({"palette", s});
  s = Written{};
  s.interlaced = true;
  cases.push_back({"interlaced gray", s});
  s = Written{};
  s.colour_type = PNG_COLOR_TYPE_RGB;
  s.suggested_palette = true;
  cases.push_back({"RGB with a suggested palette", s});
  for (const Case& c : cases) {
    const std::string png = WritePng(19, 23, c.spec);
    for (bool gray : {true, false}) {
      SCOPED_TRACE(testing::Message() << c.what << " depth " << c.spec.depth << " gray " << gray);
      EXPECT_FALSE(DecodePngDirect(png, gray).has_value());
      ASSERT_TRUE(ThroughLibpng(png, gray).ok());
      ExpectServedAsLibpng(png, gray);
    }
  }
}

// Damaged or unusual files: the direct reader declines each, and the server answers as
// libpng alone does (an error, or libpng's tolerant decode).
TEST(PngDirect, DeclinesEveryIrregularity) {
  const std::string ihdr = Ihdr(4, 3);
  const std::string idat = Chunk("IDAT", Zlib(GrayRows()));
  const std::string iend = Chunk("IEND", "");
  const std::string good = Assemble({ihdr, idat, iend});
  ASSERT_TRUE(DecodePngDirect(good, true).has_value());
  ExpectServedAsLibpng(good, true);

  std::string bad_crc = good;
  bad_crc[good.size() - 12 - 5] ^= 0x10;  // the last byte of IDAT's payload
  const std::string two_rows = GrayRows().substr(0, 10);
  const std::string extra_row = GrayRows() + GrayRows().substr(0, 5);
  const std::string zlib = Zlib(GrayRows());
  const std::string cases[] = {
      bad_crc,
      good.substr(0, good.size() - 12),                                     // no IEND
      good.substr(0, good.size() - 30),                                     // truncated IDAT
      Assemble({ihdr, Chunk("IDAT", Zlib(GrayRows(5))), iend}),             // filter 5
      Assemble({ihdr, Chunk("IDAT", Zlib(two_rows)), iend}),                // too few rows
      Assemble({ihdr, Chunk("IDAT", Zlib(extra_row)), iend}),               // too many
      Assemble({ihdr, Chunk("IDAT", zlib + std::string("\x03\x00", 2)), iend}),  // trailing
      Assemble({ihdr, Chunk("IDAT", zlib.substr(0, 2) + "\xff\xff"), iend}),  // bad deflate
      Assemble({ihdr, Chunk("IDAT", zlib.substr(0, zlib.size() - 1) +
                                        static_cast<char>(zlib.back() ^ 1)),
                iend}),                                                     // Adler-32
      Assemble({ihdr, Chunk("ABCD", "x"), idat, iend}),                     // critical, unknown
      Assemble({ihdr, Chunk("PLTE", "\x01\x02\x03"), idat, iend}),          // PLTE in gray
      Assemble({ihdr, idat, Chunk("IHDR", ihdr.substr(8, 13)), iend}),      // second IHDR
      Assemble({ihdr, Chunk("IDAT", zlib.substr(0, 5)), Chunk("tEXt", std::string("a\0b", 3)),
                Chunk("IDAT", zlib.substr(5)), iend}),                      // IDATs split
      Assemble({ihdr, iend}),                                               // no IDAT
      Assemble({ihdr, idat, Chunk("IEND", "x")}),                           // IEND with data
      Assemble({ihdr, Chunk("ta\x01t", ""), idat, iend}),                   // type not letters
  };
  int i = 0;
  for (const std::string& png : cases) {
    SCOPED_TRACE(testing::Message() << "case " << i++);
    EXPECT_FALSE(DecodePngDirect(png, true).has_value());
    ExpectServedAsLibpng(png, true);
  }
  // A stream whose header declares a window smaller than the image and than its own
  // reach (256 bytes, with matches 300 bytes back): libpng refuses it, one inflate call over
  // the whole image would not.
  std::string far_raw;
  for (int r = 0; r < 20; ++r) {
    far_raw += '\0';
    for (int c = 0; c < 30; ++c) far_raw += static_cast<char>(r < 10 ? (c * 37 + r * 11) % 256 : 0);
  }
  far_raw.replace(10 * 31, 10 * 31, far_raw.substr(0, 10 * 31));  // rows 10..19 repeat 0..9
  std::string far_stream = Zlib(far_raw);
  std::string small_window = far_stream;
  small_window[0] = 0x08;  // CINFO 0 (256 bytes), CM 8
  small_window[1] = static_cast<char>(31 - (0x08 * 256 % 31));  // FCHECK, no dictionary
  const std::string far_ihdr = Ihdr(30, 20);
  const std::string declared_small =
      Assemble({far_ihdr, Chunk("IDAT", small_window), iend});
  EXPECT_FALSE(DecodePngDirect(declared_small, true).has_value());
  EXPECT_FALSE(ThroughLibpng(declared_small, true).ok());
  ExpectServedAsLibpng(declared_small, true);
  const std::optional<cv::Mat> full_window =
      DecodePngDirect(Assemble({far_ihdr, Chunk("IDAT", far_stream), iend}), true);
  ASSERT_TRUE(full_window.has_value());  // the same data with a 32 KiB window
  EXPECT_EQ(full_window->at<unsigned char>(15, 4), full_window->at<unsigned char>(5, 4));
  // A small declared window covering the whole image (as libpng writes small images).
  std::string covering = Zlib(GrayRows());
  covering[0] = 0x08;
  covering[1] = static_cast<char>(31 - (0x08 * 256 % 31));
  const std::string small = Assemble({ihdr, Chunk("IDAT", covering), iend});
  EXPECT_TRUE(DecodePngDirect(small, true).has_value());
  ExpectServedAsLibpng(small, true);

  // A DEFLATE stream with length symbol 286, which the format reserves: two zero
  // literals, then "286" at distance 1, read as 258 more zeros by lenient inflaters
  // (libdeflate) and refused by zlib, hence by libpng. 259 x 1 gray: 260 bytes inflated.
  const std::string reserved_symbol("\x78\x01\x63\x60\x18\x03\x00\x01\x04\x00\x01", 11);
  const std::string lenient = Assemble({Ihdr(259, 1), Chunk("IDAT", reserved_symbol), iend});
  EXPECT_FALSE(DecodePngDirect(lenient, true).has_value());
  EXPECT_FALSE(ThroughLibpng(lenient, true).ok());
  ExpectServedAsLibpng(lenient, true);

  // An ancillary chunk with a broken CRC is left to libpng too (it warns and goes on).
  std::string bad_text = Assemble({ihdr, Chunk("tEXt", std::string("a\0b", 3)), idat, iend});
  bad_text[33 + 8] ^= 1;
  EXPECT_FALSE(DecodePngDirect(bad_text, true).has_value());
  ExpectServedAsLibpng(bad_text, true);
  // Several IDATs in one run, one of them empty, and bytes after IEND: read directly.
  const std::string split = Assemble({ihdr, Chunk("IDAT", zlib.substr(0, 3)), Chunk("IDAT", ""),
                                      Chunk("IDAT", zlib.substr(3)), iend}) + "junk";
  const std::optional<cv::Mat> direct = DecodePngDirect(split, true);
  ASSERT_TRUE(direct.has_value());
  ExpectServedAsLibpng(split, true);
  EXPECT_EQ(direct->at<unsigned char>(2, 3), 2 * 40 + 3 * 9);
}

// A header declaring far more pixels than its data could inflate to is refused before any
// pixel memory is allocated; the most compressible real image is not.
TEST(PngDirect, DataTooShortForItsSizeIsRefusedEarly) {
  const std::string rows = GrayRows();
  const std::string bomb =
      Assemble({Ihdr(4000, 3000), Chunk("IDAT", Zlib(rows)), Chunk("IEND", "")});
  EXPECT_TRUE(PngDataTooShort(bomb));
  const absl::StatusOr<ImageHeader> header = ReadImageHeader(bomb);
  ASSERT_TRUE(header.ok());
  const absl::StatusOr<cv::Mat> decoded = DecodeImagePixels(bomb, *header, {true, {}});
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("too short for its size"), std::string::npos)
      << decoded.status();

  // 2048 x 2048 zeros (plus filter bytes) deflate about 1000:1, close to DEFLATE's best.
  const std::string zeros(2048 * 2049, '\0');
  const std::string flat =
      Assemble({Ihdr(2048, 2048), Chunk("IDAT", Zlib(zeros)), Chunk("IEND", "")});
  EXPECT_GT(zeros.size() / (flat.size() - 57), 900u);
  EXPECT_FALSE(PngDataTooShort(flat));
  const std::optional<cv::Mat> direct = DecodePngDirect(flat, true);
  ASSERT_TRUE(direct.has_value());
  EXPECT_EQ(cv::countNonZero(*direct), 0);
  ExpectServedAsLibpng(flat, true);
  EXPECT_FALSE(PngDataTooShort(Assemble({Ihdr(4, 3), Chunk("IDAT", Zlib(rows)),
                                         Chunk("IEND", "")})));
}

}  // namespace
}  // namespace gatescope
