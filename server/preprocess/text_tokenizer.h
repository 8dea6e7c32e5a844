// A text model's tokenizer as the server applies it to requests: the checks on request
// text (size, UTF-8, emptiness), SentencePiece encoding, and the model's length policy
// (TextConfig: max_tokens, overflow). Immutable after creation; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/config/model_config.h"
#include "server/preprocess/sentencepiece_model.h"

namespace gatescope {

// A request text as the model reads it.
struct TokenizedText {
  std::vector<TextPiece> pieces;  // at most max_tokens: the pieces the model reads
  bool truncated = false;         // the text has more pieces than max_tokens
  size_t encoded_bytes = 0;       // how much of the text (from its start) was encoded
};

class TextTokenizer {
 public:
  // Default of TextConfig.max_text_bytes.
  static constexpr int64_t kDefaultMaxTextBytes = 64 * 1024;

  // `model_proto`: the serialized SentencePiece model the archive carries. `config` must
  // be checked already (CheckTextConfig). INVALID_ARGUMENT when the bytes are not a
  // SentencePiece model or its padding id differs from the config's.
  static absl::StatusOr<std::unique_ptr<TextTokenizer>> Create(const std::string& model_proto,
                                                              const TextConfig& config);

  // Cheap checks for the receiving thread: INVALID_ARGUMENT for empty text, text over
  // max_text_bytes and invalid UTF-8 (naming the byte offset).
  absl::Status CheckText(std::string_view text) const;

  // CheckText, then the first max_tokens pieces: INVALID_ARGUMENT when the text has no
  // pieces (e.g. only whitespace) or, under overflow "refuse", more than max_tokens.
  // CPU-bound. When words_encode_alone(), a long text is encoded only as far as its first
  // max_tokens + 1 pieces reach: the pieces are those of the whole text, but how many the
  // whole text has is not known.
  absl::StatusOr<TokenizedText> Tokenize(std::string_view text) const;

  int vocab_size() const { return model_->vocab_size(); }
  // The string of piece `id` (a TextPiece's id).
  const std::string& piece(int id) const { return model_->Piece(id); }
  const SentencePieceModel& model() const { return *model_; }
  int64_t max_text_bytes() const { return max_text_bytes_; }
  int max_tokens() const { return max_tokens_; }
  // Whether the model encodes each space-separated word on its own, so that a text cut
  // before a space gives the whole text's pieces up to the cut: spaces are escaped to the
  // word marker U+2581, which only ever begins a piece (no piece continues across a word's
  // start), and the normalizer is one of SentencePiece's built-in rule sets, without rules
  // of its own (none joins a character to the space after it); and every cut of a probe
  // text of many scripts and symbols keeps the whole text's pieces (CheckWordCuts), which
  // catches a normalizer that carries a built-in's name but maps differently where the
  // probe reaches. Otherwise every text is encoded whole.
  bool words_encode_alone() const { return why_encoded_whole_.empty(); }
  // Why not, when !words_encode_alone() (which check failed); empty otherwise.
  const std::string& why_encoded_whole() const { return why_encoded_whole_; }

 private:
  TextTokenizer(std::unique_ptr<SentencePieceModel> model, const TextConfig& config,
                std::string why_encoded_whole);

  // Sets out->pieces to those of a start of `text` that reach past max_tokens, else of the
  // whole text, and out->encoded_bytes to that start's length.
  bool EncodeLeadingPieces(std::string_view text, TokenizedText* out, std::string* error) const;

  std::unique_ptr<SentencePieceModel> model_;
  std::string why_encoded_whole_;  // empty when words_encode_alone()
  int max_tokens_;
  bool truncate_;
  int64_t max_text_bytes_;
};

// Where TextTokenizer cuts a text when words_encode_alone(): before byte `p`, a space
// (U+0020) that follows an ASCII graphic character. The pieces of text.substr(0, p) are
// then the whole text's pieces up to p (CheckWordCuts).
bool IsWordCut(std::string_view text, size_t p);

// What CheckWordCuts found.
struct WordCutCheck {
  size_t checked = 0;    // cuts encoded and compared
  size_t bad = 0;        // cuts whose start of the text did not give the whole text's pieces
  size_t first_bad = 0;  // byte offset of the first bad cut (when bad > 0)
  std::string error;     // SentencePiece's, when it failed (nothing checked)
};

// Encodes valid UTF-8 `text` whole with `model`, and the text's start before each of up to
// `most_cuts` places IsWordCut allows (all of them, or that many spread over the text):
// a cut is good when the start's pieces are the whole text's first ones, with the same ids
// and offsets, and the whole text has no further piece inside the start. CPU-bound: one
// encoding of the whole text and one per cut. Used when a tokenizer loads (on a probe
// text) and by the tests (on corpora).
WordCutCheck CheckWordCuts(const SentencePieceModel& model, std::string_view text,
                           size_t most_cuts);

// INVALID_ARGUMENT naming the field unless `config` is complete: tokenizer
// "sentencepiece", a tokenizer_file, max_tokens >= 1, overflow "truncate" or "refuse",
// max_text_bytes >= 0, pad_id >= 0.
absl::Status CheckTextConfig(const TextConfig& config);

}  // namespace gatescope
