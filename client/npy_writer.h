// NumPy .npy (format version 1.0) files of little-endian float32 arrays, C order.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace gatescope::client {

// The magic, version, header length and header dict of a '<f4' array of `shape`; the dict
// is padded with spaces and ends in '\n' so the data starts at a multiple of 64 bytes.
inline std::string NpyHeader(const std::vector<int64_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t prefix = 10;  // magic (6) + version (2) + header length (2)
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  return out + dict;
}

// Number of elements of `shape` (1 for a scalar); -1 if a dimension is negative.
inline int64_t NpyElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

// A whole .npy file of `shape` whose data is `le_float32` (already little-endian float32
// bytes, e.g. a gatescope.v1.Tensor's data). Empty if the byte count does not match.
inline std::string NpyFile(const std::vector<int64_t>& shape, std::string_view le_float32) {
  const int64_t n = NpyElements(shape);
  if (n < 0 || static_cast<uint64_t>(n) * 4 != le_float32.size()) return {};
  return NpyHeader(shape) + std::string(le_float32);
}

// As above, from host floats (encoded little-endian whatever the host's byte order).
inline std::string NpyFile(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  std::string bytes;
  bytes.reserve(values.size() * 4);
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b) bytes += static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  return NpyFile(shape, bytes);
}

// Writes NpyFile(shape, le_float32) to `path`; false if the sizes mismatch or the write fails.
inline bool WriteNpy(const std::string& path, const std::vector<int64_t>& shape,
                     std::string_view le_float32) {
  const std::string file = NpyFile(shape, le_float32);
  if (file.empty()) return false;
  std::ofstream out(path, std::ios::binary);
  return static_cast<bool>(out.write(file.data(), static_cast<std::streamsize>(file.size())));
}

}  // namespace gatescope::client
