// libgatescope_sentencepiece: SentencePiece behind a C interface, loaded by
// sentencepiece_model.cc into its own link-map namespace (dlmopen).
//
// Why: Debian's libsentencepiece carries its own copy of protobuf 3.14 and exports it;
// in a process that also links libprotobuf 3.21 (the server: gRPC, the APIs) the two
// copies' symbols interpose and the process aborts at start-up (protobuf's version
// check) or worse. Loaded alone in a fresh namespace, this library and its SentencePiece
// see only their own protobuf. Only plain C types cross the boundary: the namespaces have
// separate C++ runtimes and heaps. Thread-safe: encoding does not change the model.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace {

void CopyError(const std::string& message, char* error, size_t capacity) {
  if (capacity == 0) return;
  const size_t n = std::min(message.size(), capacity - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

sentencepiece::SentencePieceProcessor* Processor(void* model) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(model);
}

}  // namespace

extern "C" {

// A model from its serialized ModelProto; null with `error` set when it is not one.
__attribute__((visibility("default"))) void* gs_spm_load(const char* data, size_t size,
                                                          char* error, size_t error_capacity) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  const auto status = processor->LoadFromSerializedProto(std::string(data, size));
  if (!status.ok()) {
    CopyError(status.ToString(), error, error_capacity);
    delete processor;
    return nullptr;
  }
  return processor;
}

__attribute__((visibility("default"))) void gs_spm_free(void* model) { delete Processor(model); }

// Scratch for gs_spm_encode: the encoded text's message, kept between calls so that its
// pieces and their strings are reused instead of allocated per piece. One caller at a time
// (the server keeps one per thread); freed with gs_spm_scratch_free.
__attribute__((visibility("default"))) void* gs_spm_scratch_new() {
  return new sentencepiece::ImmutableSentencePieceText();
}

__attribute__((visibility("default"))) void gs_spm_scratch_free(void* scratch) {
  delete static_cast<sentencepiece::ImmutableSentencePieceText*>(scratch);
}

// Encodes `text` (valid UTF-8) using `scratch` (gs_spm_scratch_new). Writes
// min(pieces, capacity) triples (id, begin, end: code point offsets) to `out` and returns
// the number of pieces, or -1 with `error` set.
__attribute__((visibility("default"))) int64_t gs_spm_encode(void* model, void* scratch,
                                                              const char* text, size_t size,
                                                              int32_t* out, int64_t capacity,
                                                              char* error, size_t error_capacity) {
  auto& encoded = *static_cast<sentencepiece::ImmutableSentencePieceText*>(scratch);
  // Encode clears the message first; cleared pieces stay allocated for the next text.
  const auto status = Processor(model)->Encode(std::string_view(text, size),
                                               encoded.mutable_proto());
  if (!status.ok()) {
    CopyError(status.ToString(), error, error_capacity);
    return -1;
  }
  encoded.ConvertToUnicodeSpans();
  const int64_t n = static_cast<int64_t>(encoded.pieces_size());
  for (int64_t i = 0; i < std::min(n, capacity); ++i) {
    const auto piece = encoded.pieces(static_cast<int>(i));
    out[3 * i] = static_cast<int32_t>(piece.id());
    out[3 * i + 1] = static_cast<int32_t>(piece.begin());
    out[3 * i + 2] = static_cast<int32_t>(piece.end());
  }
  return n;
}

__attribute__((visibility("default"))) int32_t gs_spm_vocab_size(void* model) {
  return Processor(model)->GetPieceSize();
}

__attribute__((visibility("default"))) int32_t gs_spm_pad_id(void* model) {
  return Processor(model)->pad_id();
}

// Writes min(length, capacity) bytes of piece `id` to `out`; returns its length.
__attribute__((visibility("default"))) int64_t gs_spm_piece(void* model, int32_t id, char* out,
                                                             int64_t capacity) {
  const std::string piece = Processor(model)->IdToPiece(id);
  std::memcpy(out, piece.data(), std::min<size_t>(piece.size(), static_cast<size_t>(capacity)));
  return static_cast<int64_t>(piece.size());
}

}  // extern "C"
