#include "server/preprocess/text_tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/preprocess/utf8.h"

namespace gatescope {

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

TextTokenizer::TextTokenizer(std::unique_ptr<SentencePieceModel> model, const TextConfig& config)
    : model_(std::move(model)),
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
  return std::unique_ptr<TextTokenizer>(new TextTokenizer(std::move(model), config));
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

absl::StatusOr<TokenizedText> TextTokenizer::Tokenize(std::string_view text) const {
  if (absl::Status st = CheckText(text); !st.ok()) return st;
  TokenizedText out;
  std::string error;
  if (!model_->Encode(text, &out.pieces, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("text cannot be tokenized: ", error));
  }
  out.token_count = static_cast<int32_t>(out.pieces.size());
  if (out.pieces.empty()) {
    return absl::InvalidArgumentError("text has no tokens (only whitespace or control characters)");
  }
  if (out.token_count > max_tokens_) {
    if (!truncate_) {
      return absl::InvalidArgumentError(absl::StrCat("text has ", out.token_count,
                                                     " tokens, over the model's limit of ",
                                                     max_tokens_, " (text.max_tokens)"));
    }
    out.pieces.resize(max_tokens_);
    out.truncated = true;
  }
  return out;
}

}  // namespace gatescope
