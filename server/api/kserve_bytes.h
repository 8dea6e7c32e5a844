// KServe v2's raw BYTES contents: each element is its length as a little-endian uint32, then
// its bytes. One definition for the server (requests in, classification outputs out, REST's
// JSON <-> binary, warm-up text files) and the clients (gatescope-perf's requests). Torch-
// and gRPC-free, so the clients link it without ATen; pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gatescope {

// Appends `element` to `raw` (its length, then its bytes). An element of 4 GiB or more does
// not fit the length field; callers bound their elements far below that.
void AppendBytesElement(std::string_view element, std::string& raw);

// Views of the elements of `raw` (which must outlive them), in order; none for empty `raw`.
// INVALID_ARGUMENT ("ModelInfer: truncated BYTES ...") when a length or an element runs past
// the end.
absl::StatusOr<std::vector<std::string_view>> SplitRawBytes(std::string_view raw);

}  // namespace gatescope
