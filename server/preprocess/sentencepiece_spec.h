// The settings of a serialized SentencePiece model (its ModelProto) that decide whether a
// text's leading words can be encoded without the rest of the text, read from the bytes
// the model archive carries.
//
// Why read the bytes here: the shim's SentencePiece (0.1.97 in Debian) exposes neither
// these settings nor the ModelProto's generated header, and the server cannot link the
// library's protobuf (sentencepiece_model.h). The bytes are parsed as protobuf fields of
// unknown type (google::protobuf::UnknownFieldSet) and read by their numbers in
// SentencePiece's sentencepiece_model.proto.
#pragma once

#include <string>
#include <string_view>

namespace gatescope {

struct SentencePieceSpec {
  std::string normalizer_name;              // NormalizerSpec.name (3.1)
  bool has_normalization_rules = false;     // NormalizerSpec.normalization_rule_tsv (3.6)
  bool escape_whitespaces = true;           // NormalizerSpec.escape_whitespaces (3.5)
  bool treat_whitespace_as_suffix = false;  // TrainerSpec.treat_whitespace_as_suffix (2.24)
};

// False when `model_proto` is not a well-formed protobuf message; settings it lacks keep
// SentencePiece's defaults. (The normalizer is known by its name; the character map the
// encoder applies, NormalizerSpec.precompiled_charsmap, is trusted to be that name's.)
bool ReadSentencePieceSpec(std::string_view model_proto, SentencePieceSpec* spec);

}  // namespace gatescope
