#include "server/preprocess/sentencepiece_spec.h"

#include <google/protobuf/unknown_field_set.h>

#include <cstdint>

namespace gatescope {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Field numbers in sentencepiece_model.proto.
constexpr int kModelTrainerSpec = 2;
constexpr int kModelNormalizerSpec = 3;
constexpr int kTrainerTreatWhitespaceAsSuffix = 24;
constexpr int kNormalizerName = 1;
constexpr int kNormalizerEscapeWhitespaces = 5;
constexpr int kNormalizerRuleTsv = 6;

// Calls `read` with the fields of each submessage numbered `number` in `fields`, in order
// (repeated ones merge, as protobuf merges them). False when one is not a message.
template <typename F>
bool ForEachSubmessage(const UnknownFieldSet& fields, int number, F read) {
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& field = fields.field(i);
    if (field.number() != number) continue;
    if (field.type() != UnknownField::TYPE_LENGTH_DELIMITED) return false;
    UnknownFieldSet inner;
    if (!inner.ParseFromString(field.length_delimited())) return false;
    read(inner);
  }
  return true;
}

// The last field numbered `number` of wire type `type` (proto2: the last one wins), or null.
const UnknownField* LastField(const UnknownFieldSet& fields, int number, UnknownField::Type type) {
  const UnknownField* last = nullptr;
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& field = fields.field(i);
    if (field.number() == number && field.type() == type) last = &field;
  }
  return last;
}

void ReadBool(const UnknownFieldSet& fields, int number, bool* out) {
  if (const UnknownField* f = LastField(fields, number, UnknownField::TYPE_VARINT)) {
    *out = f->varint() != 0;
  }
}

void ReadString(const UnknownFieldSet& fields, int number, std::string* out) {
  if (const UnknownField* f = LastField(fields, number, UnknownField::TYPE_LENGTH_DELIMITED)) {
    *out = f->length_delimited();
  }
}

}  // namespace

bool ReadSentencePieceSpec(std::string_view model_proto, SentencePieceSpec* spec) {
  UnknownFieldSet model;
  if (model_proto.size() > static_cast<size_t>(INT32_MAX) ||
      !model.ParseFromArray(model_proto.data(), static_cast<int>(model_proto.size()))) {
    return false;
  }
  const bool trainer = ForEachSubmessage(model, kModelTrainerSpec, [&](const UnknownFieldSet& t) {
    ReadBool(t, kTrainerTreatWhitespaceAsSuffix, &spec->treat_whitespace_as_suffix);
  });
  const bool normalizer =
      ForEachSubmessage(model, kModelNormalizerSpec, [&](const UnknownFieldSet& n) {
        ReadString(n, kNormalizerName, &spec->normalizer_name);
        ReadBool(n, kNormalizerEscapeWhitespaces, &spec->escape_whitespaces);
        std::string rules;
        ReadString(n, kNormalizerRuleTsv, &rules);
        if (!rules.empty()) spec->has_normalization_rules = true;
      });
  return trainer && normalizer;
}

}  // namespace gatescope
