// UTF-8 validation of request text (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF). Written here because neither Abseil 20220623 nor SentencePiece offers
// a public validator (SentencePiece silently replaces bad bytes), and request text must
// be refused, not altered.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace gatescope {

// The byte offset of the first byte that is not part of a valid UTF-8 sequence, or
// nullopt when all of `text` is valid.
std::optional<size_t> FirstInvalidUtf8(std::string_view text);

}  // namespace gatescope
