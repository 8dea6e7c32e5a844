// Task "text_classification": a text model (e.g. DGT) reads UTF-8 text through the
// SentencePiece tokenizer its archive carries (TextConfig) and forward(token_ids,
// attention_mask) returns "logits" [B, classes] (and optional per-layer statistics
// [B, layers]). Requests of different lengths share calls, padded per length bucket
// (text_batches.h). Predictions are the top-k classes; explanations are token maps over
// the text's pieces (rollout, gates, per-layer attention) with the pieces and their
// character offsets, through gatescope.v1 Explain (and KServe parameters, one text per
// call).
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>

#include "absl/strings/str_cat.h"
#include "server/api/kserve_tensors.h"
#include "server/common/log.h"
#include "server/explain/token_maps.h"
#include "server/preprocess/text_tokenizer.h"
#include "server/tasks/class_scores.h"
#include "server/tasks/guarded.h"
#include "server/tasks/classification_explain.h"
#include "server/tasks/task_registry.h"
#include "server/tasks/text_batches.h"
#include "server/tasks/text_job.h"

namespace gatescope {
namespace {

// The KServe name of a text model's one input: BYTES [B] (or [B, 1]) of UTF-8 texts.
constexpr char kTextInputName[] = "text";

// The token layout of a text of `pieces` pieces: one row of pieces after the class token.
MapLayout LayoutFor(const ModelConfig& config, int64_t pieces) {
  ModelConfig shaped = config;
  shaped.clear_token_grid();
  shaped.add_token_grid(1);
  shaped.add_token_grid(static_cast<int32_t>(pieces));
  shaped.set_cls_token(true);
  return TokenLayoutOf(shaped);
}

// Token maps over a row of pieces, with that row's axis dropped: rollout [T], gates per
// layer [H, T] (TokenMapCollector lays pieces out as a 1 x T grid).
TokenMaps DropGridRow(TokenMaps maps) {
  if (maps.rollout.defined()) maps.rollout = maps.rollout.reshape({-1});
  for (at::Tensor& g : maps.gates) g = g.reshape({g.size(0), -1});
  return maps;
}

// What the model read of `text`; with its pieces (strings from `with_pieces`) unless that
// is null.
void FillTextInput(const TokenizedText& text, const TextTokenizer* with_pieces,
                   v1::TextInput* out) {
  out->set_pieces_read(static_cast<int32_t>(text.pieces.size()));
  out->set_truncated(text.truncated);
  int32_t chars_read = 0;
  for (const TextPiece& p : text.pieces) chars_read = std::max(chars_read, p.end);
  out->set_chars_read(chars_read);
  if (with_pieces == nullptr) return;
  for (const TextPiece& p : text.pieces) {
    v1::TextToken* t = out->add_tokens();
    t->set_piece(with_pieces->piece(p.id));
    t->set_id(p.id);
    t->set_begin(p.begin);
    t->set_end(p.end);
  }
}

// Where a job's explanation collector is left for its writer, once the pieces are known.
using CollectorSlot = std::shared_ptr<std::shared_ptr<MapCollector>>;

// `make`, also leaving what it made in `slot`.
TextJob::CollectorFor Remembering(TextJob::CollectorFor make, CollectorSlot slot) {
  return [make = std::move(make), slot](const TokenizedText& t)
             -> absl::StatusOr<std::shared_ptr<MapCollector>> {
    auto made = make(t);
    if (made.ok()) *slot = *made;
    return made;
  };
}

class TextClassificationTask final : public Task {
 public:
  TextClassificationTask(ModelConfig config, TaskOptions options,
                         std::shared_ptr<const TextTokenizer> tokenizer)
      : config_(std::move(config)), options_(options), tokenizer_(std::move(tokenizer)) {}

  const ModelConfig& config() const override { return config_; }

  absl::StatusOr<std::unique_ptr<InferenceJob>> Predict(const v1::PredictRequest& request,
                                                        v1::PredictResponse* response,
                                                        CallDone done) const override {
    auto text = V1Text(request);
    if (!text.ok()) return text.status();
    auto k = TopKOf(request.top_k());
    if (!k.ok()) return k.status();
    auto write = [this, response, k = *k](const NamedTensors& outputs, const TokenizedText& t) {
      FillTextInput(t, nullptr, response->mutable_text());
      return FillClasses(config_, outputs, k, response);
    };
    return std::unique_ptr<InferenceJob>(
        std::make_unique<TextJob>(*text, text->size(), tokenizer_, std::move(write),
                                  std::move(done)));
  }

  absl::StatusOr<std::unique_ptr<InferenceJob>> Explain(const v1::ExplainRequest& request,
                                                        v1::ExplainResponse* response,
                                                        CallDone done) const override {
    auto text = V1Text(request);
    if (!text.ok()) return text.status();
    if (request.heatmap_png()) {
      return absl::InvalidArgumentError("heatmap_png needs an image input; text models return "
                                        "their maps over the text's tokens");
    }
    auto k = TopKOf(request.top_k());
    if (!k.ok()) return k.status();
    const ExplainOptions options = ExplainOptionsOf(request);
    auto collector_for = Explanation(options);
    if (!collector_for.ok()) return collector_for.status();
    auto collector = std::make_shared<CollectorSlot::element_type>();
    auto write = [this, response, k = *k, collector](const NamedTensors& outputs,
                                                      const TokenizedText& t) -> absl::Status {
      if (absl::Status st = FillClasses(config_, outputs, k, response); !st.ok()) return st;
      auto* tokens = static_cast<TokenMapCollector*>(collector->get());
      if (tokens == nullptr) return absl::InternalError("explanation finished without maps");
      auto maps = tokens->Finish();
      if (!maps.ok()) return maps.status();
      FillTokenMaps(DropGridRow(*std::move(maps)), response);
      FillTextInput(t, tokenizer_.get(), response->mutable_text());
      return absl::OkStatus();
    };
    return std::unique_ptr<InferenceJob>(std::make_unique<TextJob>(
        *text, text->size(), tokenizer_, std::move(write), std::move(done),
        Remembering(*std::move(collector_for), collector)));
  }

  absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> Infer(
      const ::inference::ModelInferRequest& request,
      const std::shared_ptr<InferResults>& results) const override {
    if (absl::Status st = RefuseOtherTasksParameters(request, config_.task()); !st.ok()) return st;
    auto explain = ExplainParameters(request);
    if (!explain.ok()) return explain.status();
    for (const auto& o : request.outputs()) {
      const bool known = explain->has_value() ? (o.name() == "logits" || IsTokenMapOutput(o.name()))
                                              : DeclaresOutput(config_, o.name());
      if (!known) {
        return absl::InvalidArgumentError(absl::StrCat("model has no output '", o.name(), "'"));
      }
    }
    auto input = ReadSingleInput(request);
    if (!input.ok()) return input.status();
    if (request.inputs(0).name() != kTextInputName) {
      return InvalidInfer(absl::StrCat("the model's input is named '", kTextInputName,
                                       "', not '", request.inputs(0).name(), "'"));
    }
    auto texts = Texts(*input);
    if (!texts.ok()) return texts.status();
    std::optional<TextJob::CollectorFor> per_text;
    if (explain->has_value()) {
      if (texts->size() != 1) {
        return InvalidInfer(absl::StrCat(
            "explanations take one text per call (their maps differ in length), got ",
            texts->size()));
      }
      auto collector_for = Explanation(**explain);
      if (!collector_for.ok()) return collector_for.status();
      per_text = *std::move(collector_for);
    }
    results->Expect(texts->size());
    size_t call_bytes = 0;
    for (std::string_view text : *texts) call_bytes += text.size();
    std::vector<std::unique_ptr<InferenceJob>> jobs;
    for (size_t i = 0; i < texts->size(); ++i) {
      auto collector = std::make_shared<CollectorSlot::element_type>();
      std::optional<TextJob::CollectorFor> make;
      if (per_text) make = Remembering(*per_text, collector);
      auto write = [results, i, collector](const NamedTensors& outputs,
                                           const TokenizedText&) -> absl::Status {
        NamedTensors all = outputs;
        if (*collector != nullptr) {
          auto maps = static_cast<TokenMapCollector*>(collector->get())->Finish();
          if (!maps.ok()) return maps.status();
          for (auto& [name, t] : TokenMapTensors(DropGridRow(*std::move(maps)))) {
            all.insert_or_assign(name, t);
          }
        }
        results->Store(i, std::move(all));
        return absl::OkStatus();
      };
      auto done = [results, i](absl::Status status) { results->Complete(i, std::move(status)); };
      jobs.push_back(std::make_unique<TextJob>((*texts)[i], call_bytes, tokenizer_,
                                               std::move(write), std::move(done),
                                               std::move(make)));
    }
    return jobs;
  }

  // "text" BYTES [1] per example; "logits" [classes] and per-layer statistics [layers].
  KServeSignature Signature() const override {
    KServeSignature s;
    s.input = {kTextInputName, "BYTES", ::inference::TYPE_STRING, {1}};
    for (const auto& name : config_.outputs()) {
      s.outputs.push_back({name, "FP32", ::inference::TYPE_FP32,
                           {name == "logits" ? config_.labels_size() : config_.layers()}});
    }
    return s;
  }

  absl::StatusOr<std::vector<GatheredBatch>> Gather(const std::vector<at::Tensor>& examples,
                                                    const CallShapes& shapes) const override {
    return GatherTokenSequences(
        examples, config_.text().pad_id(),
        shapes.whole_length_buckets ? TextPadding::kWholeBuckets : TextPadding::kBuckets,
        MaxPieces());
  }

  std::vector<int64_t> PaddedLengths(const CallShapes& shapes) const override {
    if (!shapes.whole_length_buckets) return {};
    return WholeBucketLengths(MaxPieces());
  }

  absl::StatusOr<NamedTensors> Scatter(const NamedTensors& outputs, int64_t position,
                                       const at::Tensor&) const override {
    return RowOf(outputs, position);
  }

  // The longest text the model reads, every piece the pad id (a valid piece id that the
  // attention mask still marks as text).
  absl::StatusOr<at::Tensor> WarmUpExample() const override {
    return at::full({MaxPieces()}, config_.text().pad_id(), at::kLong);
  }

  absl::StatusOr<at::Tensor> TextWarmUpExample(std::string_view text) const override {
    return Guarded("tokenizing", [&]() -> absl::StatusOr<at::Tensor> {
      absl::StatusOr<TokenizedText> tokens = tokenizer_->Tokenize(text);
      if (!tokens.ok()) return tokens.status();
      return PieceIds(*tokens);
    });
  }

 private:
  // The most pieces a request's text gives the model (its max_tokens).
  int64_t MaxPieces() const { return std::max<int64_t>(1, config_.text().max_tokens()); }

  // The text of a gatescope.v1 request, checked cheaply (size, UTF-8) on the receiving
  // thread; INVALID_ARGUMENT for image inputs and other tasks' fields.
  template <typename Request>
  absl::StatusOr<std::string_view> V1Text(const Request& request) const {
    if (request.input_case() != Request::kText) {
      return absl::InvalidArgumentError(
          "this is a text model: set the request's text (UTF-8), not an image or tensor");
    }
    if (absl::Status st = RefuseOtherTasksFields(request, config_.task()); !st.ok()) return st;
    if (absl::Status st = tokenizer_->CheckText(request.text()); !st.ok()) return st;
    return std::string_view(request.text());
  }

  // Every element of a KServe BYTES input, checked like V1Text.
  absl::StatusOr<std::vector<std::string_view>> Texts(const KServeInput& input) const {
    if (input.datatype != "BYTES") {
      return InvalidInfer(absl::StrCat("the model's input is BYTES (UTF-8 texts), not ",
                                       input.datatype));
    }
    if (absl::Status st = CheckBytesBatch(input); !st.ok()) return st;
    if (input.elements.empty()) return InvalidInfer("empty batch");
    std::vector<std::string_view> texts;
    for (size_t i = 0; i < input.elements.size(); ++i) {
      if (absl::Status st = tokenizer_->CheckText(input.elements[i]); !st.ok()) {
        return InvalidInfer(absl::StrCat("text ", i, ": ", st.message()));
      }
      texts.push_back(input.elements[i]);
    }
    return texts;
  }

  // Checks `options` against the longest text the model reads (and its byte budget), and
  // returns the maker of each text's collector.
  absl::StatusOr<TextJob::CollectorFor> Explanation(const ExplainOptions& options) const {
    const int64_t longest = config_.text().max_tokens();
    auto worst = TokenMapCollector::Create(LayoutFor(config_, longest), options,
                                           options_.explain_max_bytes);
    if (!worst.ok()) return worst.status();
    if (absl::Status st = (*worst)->CheckBudget({1, longest}); !st.ok()) return st;
    return TextJob::CollectorFor(
        [this, options](const TokenizedText& t) -> absl::StatusOr<std::shared_ptr<MapCollector>> {
          auto made = TokenMapCollector::Create(
              LayoutFor(config_, static_cast<int64_t>(t.pieces.size())), options,
              options_.explain_max_bytes);
          if (!made.ok()) return made.status();
          return std::shared_ptr<MapCollector>(*std::move(made));
        });
  }

  const ModelConfig config_;
  const TaskOptions options_;
  const std::shared_ptr<const TextTokenizer> tokenizer_;
};

absl::StatusOr<std::unique_ptr<Task>> Create(const ModelConfig& config, const TaskOptions& options,
                                             const ArchiveReader& archive) {
  if (!config.has_text()) {
    return absl::InvalidArgumentError("model config: a text_classification model needs a text block");
  }
  if (absl::Status st = CheckTextConfig(config.text()); !st.ok()) return st;
  if (config.has_input() || config.token_grid_size() > 0) {
    return absl::InvalidArgumentError(
        "model config: a text model has no image input or token_grid (its length varies)");
  }
  if (config.layers() > 0 && config.heads() <= 0) {
    return absl::InvalidArgumentError("model config: heads must be set with layers");
  }
  auto model = archive(config.text().tokenizer_file());
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat("text.tokenizer_file: ", model.status().message()));
  }
  auto tokenizer = TextTokenizer::Create(*model, config.text());
  if (!tokenizer.ok()) return tokenizer.status();
  if (!(*tokenizer)->words_encode_alone()) {
    GS_LOG(WARNING) << "text.tokenizer_file " << config.text().tokenizer_file() << ": "
                    << (*tokenizer)->why_encoded_whole()
                    << ", so every text is tokenized whole, however little of it the model "
                       "reads";
  }
  return std::unique_ptr<Task>(std::make_unique<TextClassificationTask>(
      config, options, std::shared_ptr<const TextTokenizer>(*std::move(tokenizer))));
}

std::vector<std::string> V1Fields() {
  return {"text",            "rollout",          "rollout_options", "attention_layers",
          "attention_heads", "attention_queries", "gates"};
}

}  // namespace

extern const TaskEntry kTextClassificationTask{"text_classification", Create,
                                               ExplainParameterNames, V1Fields};

}  // namespace gatescope
