#include "server/api/kserve_bytes.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace gatescope {
namespace {

TEST(KServeBytes, ElementsAreLittleEndianLengthThenBytes) {
  std::string raw;
  AppendBytesElement("ab", raw);
  AppendBytesElement("", raw);
  AppendBytesElement(std::string(258, 'x'), raw);
  ASSERT_EQ(raw.size(), 4u + 2 + 4 + 4 + 258);
  EXPECT_EQ(raw.substr(0, 6), std::string("\x02\x00\x00\x00" "ab", 6));
  EXPECT_EQ(raw.substr(6, 4), std::string("\x00\x00\x00\x00", 4));
  EXPECT_EQ(raw.substr(10, 4), std::string("\x02\x01\x00\x00", 4));  // 258 = 0x0102
}

TEST(KServeBytes, SplitGivesBackWhatWasAppended) {
  const std::string with_nul("a\0b", 3);
  // Lengths that use the second and third bytes of the length field (0x0102, 0x010203).
  const std::string long_one(0x0102, 'l'), longer(0x010203, 'L');
  std::string raw;
  for (const std::string& e : {std::string("first"), std::string(), with_nul, long_one, longer,
                               std::string()}) {
    AppendBytesElement(e, raw);
  }
  auto elements = SplitRawBytes(raw);
  ASSERT_TRUE(elements.ok()) << elements.status();
  EXPECT_EQ(*elements,
            (std::vector<std::string_view>{"first", "", with_nul, long_one, longer, ""}));
  // Views into `raw`, not copies.
  EXPECT_EQ((*elements)[0].data(), raw.data() + 4);
}

TEST(KServeBytes, EmptyContentsHoldNoElements) {
  auto elements = SplitRawBytes("");
  ASSERT_TRUE(elements.ok());
  EXPECT_TRUE(elements->empty());
}

TEST(KServeBytes, TruncatedContentsAreInvalid) {
  std::string raw;
  AppendBytesElement("hello", raw);
  for (size_t cut : {1u, 3u, 4u, 8u}) {
    auto elements = SplitRawBytes(std::string_view(raw).substr(0, cut));
    ASSERT_FALSE(elements.ok()) << "cut at " << cut;
    EXPECT_EQ(elements.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(elements.status().message(), cut < 4 ? "ModelInfer: truncated BYTES element length"
                                                   : "ModelInfer: truncated BYTES element");
  }
  // A length that claims more than the whole contents.
  const std::string huge("\xff\xff\xff\xff" "abc", 7);
  EXPECT_EQ(SplitRawBytes(huge).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
