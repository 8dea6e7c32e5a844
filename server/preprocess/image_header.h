// Reads an encoded image's declared size from its header without decoding it, so that an
// oversized image (a few KB can declare gigapixels) is refused before any allocation.
// Pure, thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "server/preprocess/normalize.h"

namespace gatescope {

// The size a PNG (IHDR) or baseline/progressive JPEG (first SOFn marker) declares;
// nullopt when the bytes are neither or the header is truncated (the decoder then decides).
std::optional<ImageSize> DeclaredImageSize(std::string_view bytes);

}  // namespace gatescope
