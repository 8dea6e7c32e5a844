#include "server/preprocess/sentencepiece_spec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstdint>
#include <string>

namespace gatescope {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

// Field numbers in sentencepiece_model.proto.
constexpr int kModelTrainerSpec = 2;
constexpr int kModelNormalizerSpec = 3;
constexpr int kTrainerTreatWhitespaceAsSuffix = 24;
constexpr int kNormalizerName = 1;
constexpr int kNormalizerRuleTsv = 6;

bool IsLengthDelimited(uint32_t tag) {
  return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
}

// What a field reader did with a field's value.
enum class Field { kRead, kSkip, kMalformed };

// Calls `field(tag, in)` for each field of the message in `in` (up to its limit); fields
// it answers kSkip for are skipped. False when the message is malformed.
template <typename F>
bool ForEachField(CodedInputStream* in, F field) {
  while (uint32_t tag = in->ReadTag()) {
    switch (field(tag, in)) {
      case Field::kRead:
        break;
      case Field::kSkip:
        if (!WireFormatLite::SkipField(in, tag)) return false;
        break;
      case Field::kMalformed:
        return false;
    }
  }
  return in->ConsumedEntireMessage();
}

// Runs `read` over the length-delimited submessage at `in`.
template <typename F>
Field ReadSubmessage(CodedInputStream* in, F read) {
  uint32_t size = 0;
  if (!in->ReadVarint32(&size) || size > static_cast<uint32_t>(INT32_MAX)) {
    return Field::kMalformed;
  }
  const auto limit = in->PushLimit(static_cast<int>(size));
  const bool ok = read(in) && in->BytesUntilLimit() == 0;  // not cut short by the input's end
  in->PopLimit(limit);
  return ok ? Field::kRead : Field::kMalformed;
}

bool ReadTrainerSpec(CodedInputStream* in, SentencePieceSpec* spec) {
  return ForEachField(in, [&](uint32_t tag, CodedInputStream* s) {
    if (WireFormatLite::GetTagFieldNumber(tag) != kTrainerTreatWhitespaceAsSuffix ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_VARINT) {
      return Field::kSkip;
    }
    uint64_t value = 0;
    if (!s->ReadVarint64(&value)) return Field::kMalformed;
    spec->treat_whitespace_as_suffix = value != 0;
    return Field::kRead;
  });
}

bool ReadNormalizerSpec(CodedInputStream* in, SentencePieceSpec* spec) {
  return ForEachField(in, [&](uint32_t tag, CodedInputStream* s) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    if (!IsLengthDelimited(tag)) return Field::kSkip;
    if (number == kNormalizerName) {
      return WireFormatLite::ReadString(s, &spec->normalizer_name) ? Field::kRead
                                                                   : Field::kMalformed;
    }
    if (number == kNormalizerRuleTsv) {
      std::string rules;
      if (!WireFormatLite::ReadString(s, &rules)) return Field::kMalformed;
      spec->has_normalization_rules = !rules.empty();
      return Field::kRead;
    }
    return Field::kSkip;
  });
}

}  // namespace

bool ReadSentencePieceSpec(std::string_view model_proto, SentencePieceSpec* spec) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(model_proto.data()),
                      static_cast<int>(model_proto.size()));
  return ForEachField(&in, [&](uint32_t tag, CodedInputStream* s) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    if (!IsLengthDelimited(tag)) return Field::kSkip;
    if (number == kModelTrainerSpec) {
      return ReadSubmessage(s, [&](CodedInputStream* m) { return ReadTrainerSpec(m, spec); });
    }
    if (number == kModelNormalizerSpec) {
      return ReadSubmessage(s, [&](CodedInputStream* m) { return ReadNormalizerSpec(m, spec); });
    }
    return Field::kSkip;
  });
}

}  // namespace gatescope
