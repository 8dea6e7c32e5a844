#include "server/api/kserve_bytes.h"

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"

namespace gatescope {
namespace {

constexpr size_t kLengthBytes = 4;

// The length field in KServe's byte order (little-endian) whatever the host's.
void AppendLength(uint32_t len, std::string& raw) {
  const char bytes[kLengthBytes] = {static_cast<char>(len & 0xff),
                                    static_cast<char>((len >> 8) & 0xff),
                                    static_cast<char>((len >> 16) & 0xff),
                                    static_cast<char>((len >> 24) & 0xff)};
  raw.append(bytes, kLengthBytes);
}

uint32_t ReadLength(const char* at) {
  unsigned char b[kLengthBytes];
  std::memcpy(b, at, kLengthBytes);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

}  // namespace

void AppendBytesElement(std::string_view element, std::string& raw) {
  AppendLength(static_cast<uint32_t>(element.size()), raw);
  raw.append(element);
}

absl::StatusOr<std::vector<std::string_view>> SplitRawBytes(std::string_view raw) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    if (raw.size() - pos < kLengthBytes) {
      return absl::InvalidArgumentError("ModelInfer: truncated BYTES element length");
    }
    const uint32_t len = ReadLength(raw.data() + pos);
    pos += kLengthBytes;
    if (raw.size() - pos < len) {
      return absl::InvalidArgumentError("ModelInfer: truncated BYTES element");
    }
    out.emplace_back(raw.data() + pos, len);
    pos += len;
  }
  return out;
}

}  // namespace gatescope
