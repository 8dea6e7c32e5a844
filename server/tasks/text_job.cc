#include "server/tasks/text_job.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <utility>

#include "server/tasks/guarded.h"

namespace gatescope {

at::Tensor PieceIds(const TokenizedText& text) {
  at::Tensor ids = at::empty({static_cast<int64_t>(text.pieces.size())}, at::kLong);
  int64_t* out = ids.data_ptr<int64_t>();
  for (const TextPiece& p : text.pieces) *out++ = p.id;
  return ids;
}

TextJob::TextJob(std::string_view text, size_t call_text_bytes,
                 std::shared_ptr<const TextTokenizer> tokenizer, Writer write, Done done,
                 std::optional<CollectorFor> explanation)
    : text_(text),
      on_caller_(call_text_bytes <= kTokenizeOnCallerBytes),
      tokenizer_(std::move(tokenizer)),
      write_(std::move(write)),
      done_(std::move(done)),
      explanation_(std::move(explanation)) {}

absl::Status TextJob::PrepareAhead() {
  auto tokens = Guarded("tokenizing", [&] { return tokenizer_->Tokenize(text_); });
  if (!tokens.ok()) return tokens.status();
  tokens_ = *std::move(tokens);
  tokenized_ = true;
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> TextJob::Prepare() {
  if (!tokenized_) {
    if (absl::Status st = PrepareAhead(); !st.ok()) return st;
  }
  return PieceIds(tokens_);
}

absl::StatusOr<ExplainPass> TextJob::BeginExplain() {
  if (!explanation_) return absl::InternalError("not an explanation job");
  auto collector = (*explanation_)(tokens_);
  if (!collector.ok()) return collector.status();
  collector_ = *std::move(collector);
  const int64_t pieces = static_cast<int64_t>(tokens_.pieces.size());
  if (absl::Status st = collector_->CheckBudget({1, pieces}); !st.ok()) return st;
  ExplainPass pass;
  pass.layers = collector_->layers();
  pass.visit = [collector = collector_](int layer, const NamedTensors& maps) {
    return collector->AddLayer(layer, maps);
  };
  return pass;
}

void TextJob::Finish(absl::StatusOr<NamedTensors> outputs) {
  absl::Status st = outputs.status();
  if (st.ok()) st = Guarded("postprocessing", [&] { return write_(*outputs, tokens_); });
  done_(st);
}

}  // namespace gatescope
