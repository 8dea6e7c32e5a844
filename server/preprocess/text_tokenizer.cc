#include "server/preprocess/text_tokenizer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/preprocess/sentencepiece_spec.h"
#include "server/preprocess/utf8.h"

namespace gatescope {
namespace {

// A first guess of the bytes that hold a piece; a text cut too short is cut again longer
// (docs/performance.md measures the choice on the held-out e-mails).
constexpr size_t kBytesPerPieceGuess = 4;

bool IsBuiltInNormalizer(std::string_view name) {
  for (std::string_view builtin : {"nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity"}) {
    if (name == builtin) return true;
  }
  return false;
}

// A text of the characters and word shapes a normalizer is most likely to treat
// differently around a space: ASCII words and punctuation, digits, tabs and line breaks,
// runs of spaces, precomposed and combining accents, compatibility forms (full-width,
// ligatures, circled and super/subscript digits, ellipsis, no-break space), CJK, Hangul,
// Cyrillic, Greek, Arabic, Devanagari, Thai, emoji with modifiers and joiners, zero-width
// and byte-order marks, and a character no vocabulary is likely to hold.
constexpr char kProbeText[] =
    "Dear Ms. O'Brien, re: invoice #4521 (due 2024-03-01) -- $1,299.99 + 7.5% VAT; see "
    "http://example.com/a?b=c&d=e or mail x.y@z.org!\tTabs\tand\nline\r\nbreaks  two  "
    "spaces   three... \"quoted\" [brackets] {braces} <angle> a|b ~tilde ^caret `tick` "
    "r\xC3\xA9sum\xC3\xA9 cafe\xCC\x81 na\xC3\xAFve \xC3\x85ngstr\xC3\xB6m "
    "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3 \xEF\xAC\x81le \xE2\x91\xA0 "
    "x\xC2\xB2 H\xE2\x82\x82O \xE2\x80\xA6 no\xC2\xA0" "break \xE2\x84\xA2 "
    "\xE4\xB8\xAD\xE6\x96\x87 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
    "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 "
    "\xCE\xB1\xCE\xB2\xCE\xB3 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 "
    "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 "
    "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA "
    "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 "
    "zero\xE2\x80\x8B" "width \xEF\xBB\xBF" "bom \xF0\x90\x8D\x88 end. "
    "The quick brown fox jumps over the lazy dog; THE QUICK BROWN FOX! 0123456789";

// Why `model` cannot be trusted to encode each word on its own; empty when it can
// (TextTokenizer::words_encode_alone).
std::string WhyWordsDoNotEncodeAlone(const std::string& model_proto,
                                     const SentencePieceModel& model) {
  SentencePieceSpec spec;
  if (!ReadSentencePieceSpec(model_proto, &spec)) return "its settings cannot be read";
  if (!IsBuiltInNormalizer(spec.normalizer_name) || spec.has_normalization_rules) {
    return absl::StrCat("its normalizer (\"", spec.normalizer_name,
                        "\") is not a built-in one without rules of its own");
  }
  if (!spec.escape_whitespaces) return "it does not escape spaces to the word marker";
  if (spec.treat_whitespace_as_suffix) return "its word markers end pieces";
  // A word starts at a space (escaped to the marker U+2581), so no piece may hold the
  // marker past its start or a space anywhere.
  constexpr std::string_view kWordMarker = "\xE2\x96\x81";
  for (int id = 0; id < model.vocab_size(); ++id) {
    const std::string& piece = model.Piece(id);
    if (piece.find(kWordMarker, 1) != std::string::npos ||
        piece.find(' ') != std::string::npos) {
      return absl::StrCat("its piece ", id, " runs across a word's start");
    }
  }
  const WordCutCheck probe = CheckWordCuts(model, kProbeText, ~size_t{0});
  if (!probe.error.empty()) return "it cannot encode the probe text: " + probe.error;
  if (probe.bad > 0) {
    return absl::StrCat("the probe text cut at byte ", probe.first_bad,
                        " is not encoded as in the whole text (", probe.bad, " of ",
                        probe.checked, " cuts)");
  }
  return "";
}

// The last cut in (after, near], else the first one past `near`, else text.size().
size_t CutNear(std::string_view text, size_t after, size_t near) {
  if (near >= text.size()) return text.size();
  for (size_t p = near; p > after; --p) {
    if (IsWordCut(text, p)) return p;
  }
  for (size_t p = std::max(near, after) + 1; p < text.size(); ++p) {
    if (IsWordCut(text, p)) return p;
  }
  return text.size();
}

}  // namespace

// Tabs and line breaks start words only under the nmt_* normalizers, which map them to
// spaces; a space starts one under every built-in normalizer.
bool IsWordCut(std::string_view text, size_t p) {
  return p >= 1 && p < text.size() && text[p] == ' ' && text[p - 1] > ' ' && text[p - 1] < 0x7f;
}

WordCutCheck CheckWordCuts(const SentencePieceModel& model, std::string_view text,
                           size_t most_cuts) {
  WordCutCheck check;
  if (most_cuts == 0) return check;
  std::vector<TextPiece> whole, start;
  if (!model.Encode(text, &whole, &check.error)) return check;
  std::vector<size_t> cuts;
  for (size_t p = 0; p < text.size(); ++p) {
    if (IsWordCut(text, p)) cuts.push_back(p);
  }
  const size_t step = cuts.size() <= most_cuts ? 1 : (cuts.size() + most_cuts - 1) / most_cuts;
  size_t p_chars = 0, counted_to = 0;  // code points in text[0, counted_to)
  for (size_t i = 0; i < cuts.size(); i += step) {
    const size_t p = cuts[i];
    for (; counted_to < p; ++counted_to) {
      p_chars += (static_cast<unsigned char>(text[counted_to]) & 0xC0) != 0x80;
    }
    if (!model.Encode(text.substr(0, p), &start, &check.error)) return check;
    bool same = start.size() <= whole.size();
    for (size_t k = 0; same && k < start.size(); ++k) {
      same = start[k].id == whole[k].id && start[k].begin == whole[k].begin &&
             start[k].end == whole[k].end;
    }
    if (same && start.size() < whole.size()) {
      same = whole[start.size()].begin >= static_cast<int32_t>(p_chars);
    }
    ++check.checked;
    if (!same && check.bad++ == 0) check.first_bad = p;
  }
  return check;
}

absl::Status CheckTextConfig(const TextConfig& config) {
  if (config.tokenizer() != "sentencepiece") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: text.tokenizer must be \"sentencepiece\", got \"", config.tokenizer(), "\""));
  }
  if (config.tokenizer_file().empty()) {
    return absl::InvalidArgumentError("model config: text.tokenizer_file is empty");
  }
  if (config.max_tokens() < 1) {
    return absl::InvalidArgumentError("model config: text.max_tokens must be >= 1");
  }
  if (config.overflow() != "truncate" && config.overflow() != "refuse") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: text.overflow must be \"truncate\" or \"refuse\", got \"",
        config.overflow(), "\""));
  }
  if (config.max_text_bytes() < 0) {
    return absl::InvalidArgumentError("model config: text.max_text_bytes must be >= 0");
  }
  if (config.pad_id() < 0) return absl::InvalidArgumentError("model config: text.pad_id must be >= 0");
  return absl::OkStatus();
}

TextTokenizer::TextTokenizer(std::unique_ptr<SentencePieceModel> model, const TextConfig& config,
                             std::string why_encoded_whole)
    : model_(std::move(model)),
      why_encoded_whole_(std::move(why_encoded_whole)),
      max_tokens_(config.max_tokens()),
      truncate_(config.overflow() == "truncate"),
      max_text_bytes_(config.max_text_bytes() > 0 ? config.max_text_bytes()
                                                  : kDefaultMaxTextBytes) {}

absl::StatusOr<std::unique_ptr<TextTokenizer>> TextTokenizer::Create(
    const std::string& model_proto, const TextConfig& config) {
  std::string error;
  auto model = SentencePieceModel::FromSerialized(model_proto, &error);
  if (model == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("text.tokenizer_file '",
                                                   config.tokenizer_file(),
                                                   "' is not a SentencePiece model: ", error));
  }
  if (model->pad_id() != config.pad_id()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: text.pad_id is ", config.pad_id(), " but the tokenizer's padding id is ",
        model->pad_id()));
  }
  std::string why_whole = WhyWordsDoNotEncodeAlone(model_proto, *model);
  return std::unique_ptr<TextTokenizer>(
      new TextTokenizer(std::move(model), config, std::move(why_whole)));
}

absl::Status TextTokenizer::CheckText(std::string_view text) const {
  if (text.empty()) return absl::InvalidArgumentError("text is empty");
  if (static_cast<int64_t>(text.size()) > max_text_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("text has ", text.size(),
                                                   " bytes, over the model's limit of ",
                                                   max_text_bytes_, " (text.max_text_bytes)"));
  }
  if (auto bad = FirstInvalidUtf8(text)) {
    return absl::InvalidArgumentError(
        absl::StrCat("text is not valid UTF-8 (byte offset ", *bad, ")"));
  }
  return absl::OkStatus();
}

bool TextTokenizer::EncodeLeadingPieces(std::string_view text, TokenizedText* out,
                                        std::string* error) const {
  if (!words_encode_alone()) {
    out->encoded_bytes = text.size();
    return model_->Encode(text, &out->pieces, error);
  }
  // Each try encodes a longer start of the text, until its pieces outnumber max_tokens or
  // it is the whole text. A start that fell short says how many bytes its pieces took: the
  // next try aims a quarter past what that predicts, or takes the whole text once that
  // aim is three quarters of it or more.
  const size_t wanted = static_cast<size_t>(max_tokens_) + 1;
  size_t cut = 0;
  size_t near = wanted * kBytesPerPieceGuess;
  if (near + near / 2 >= text.size()) near = text.size();  // short: whole at the first try
  while (true) {
    cut = CutNear(text, cut, near);
    out->encoded_bytes = cut;
    if (!model_->Encode(text.substr(0, cut), &out->pieces, error)) return false;
    if (cut == text.size() || out->pieces.size() >= wanted) return true;
    // A start ending in a graphic character has at least one piece.
    const double had = static_cast<double>(std::max<size_t>(out->pieces.size(), 1));
    const double aim = static_cast<double>(cut) * static_cast<double>(wanted) / had * 1.25;
    if (aim >= 0.75 * static_cast<double>(text.size())) {
      near = text.size();
    } else {
      near = std::max(cut + 64, static_cast<size_t>(aim));
    }
  }
}

absl::StatusOr<TokenizedText> TextTokenizer::Tokenize(std::string_view text) const {
  if (absl::Status st = CheckText(text); !st.ok()) return st;
  TokenizedText out;
  std::string error;
  if (!EncodeLeadingPieces(text, &out, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("text cannot be tokenized: ", error));
  }
  if (out.pieces.empty()) {
    return absl::InvalidArgumentError("text has no tokens (only whitespace or control characters)");
  }
  if (out.pieces.size() > static_cast<size_t>(max_tokens_)) {
    if (!truncate_) {
      return absl::InvalidArgumentError(absl::StrCat("text has more than ", max_tokens_,
                                                     " tokens, the model's limit",
                                                     " (text.max_tokens)"));
    }
    out.pieces.resize(max_tokens_);
    out.truncated = true;
  }
  return out;
}

}  // namespace gatescope
