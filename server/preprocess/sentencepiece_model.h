// A SentencePiece model, as the server uses it: loaded from the bytes a model archive
// carries, encoding text to piece ids with code point offsets.
//
// Why SentencePiece: the same library (Debian's libsentencepiece for the server,
// python3-sentencepiece for training) cuts text into pieces in both places, from the same
// serialized model that travels inside the model archive, so the server's token ids are
// the trainer's by construction rather than by reimplementation.
//
// How: Debian's libsentencepiece bundles and exports its own protobuf (3.14), which
// cannot share a process namespace with the server's libprotobuf (3.21): their symbols
// interpose and protobuf aborts at start-up. So SentencePiece is never linked into the
// server; a small shim library (sentencepiece_shim.cc, libgatescope_sentencepiece.so,
// built next to the server) wraps it behind a C interface and is loaded once per process
// with dlmopen into a link-map namespace of its own. Only plain C types cross over.
// The shim is found at $GATESCOPE_SENTENCEPIECE_SHIM, else next to the executable (the
// build tree) or in ../lib/gatescope/ from it (an install), else where the build put it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gatescope {

// One piece of an encoded text; SentencePieceModel::Piece(id) is its string.
struct TextPiece {
  int32_t id = 0;
  // Unicode code points [begin, end) of the input the piece came from.
  int32_t begin = 0;
  int32_t end = 0;
};

class SentencePieceModel {
 public:
  ~SentencePieceModel();

  // The model serialized in `model_proto` (a SentencePiece ModelProto, as written by its
  // trainer); nullptr with `*error` set when it is not one or the shim cannot be loaded.
  static std::unique_ptr<SentencePieceModel> FromSerialized(const std::string& model_proto,
                                                            std::string* error);

  // Encodes valid UTF-8 `text`. False with `*error` set when SentencePiece fails.
  // Thread-safe: encoding does not change the model. Each calling thread keeps a scratch
  // message in the shim, reused by its later calls (so a text's pieces are not allocated
  // one by one), until the thread exits.
  bool Encode(std::string_view text, std::vector<TextPiece>* pieces, std::string* error) const;

  int vocab_size() const { return static_cast<int>(vocabulary_.size()); }
  // The id of the padding piece, or -1 when the model has none.
  int pad_id() const { return pad_id_; }
  // The string of piece `id`, 0 <= id < vocab_size(); read once, when the model loads.
  const std::string& Piece(int id) const { return vocabulary_[id]; }

 private:
  SentencePieceModel(void* handle, std::vector<std::string> vocabulary, int pad_id);
  void* const handle_;  // owned; the shim's model
  const std::vector<std::string> vocabulary_;
  const int pad_id_;
};

}  // namespace gatescope
