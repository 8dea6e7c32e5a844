// The job of a text model's request, for both APIs: it tokenizes its text on the model's
// worker (Prepare: the example is the piece ids, INT64 [T]), runs an explanation pass
// when it carries one (its collector is made once the pieces are known), and hands the
// outputs with the tokenized text to its writer. Writing is guarded, so an exception
// becomes INTERNAL and the request still finishes exactly once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/explain/map_collector.h"
#include "server/preprocess/text_tokenizer.h"
#include "server/tasks/inference_job.h"

namespace gatescope {

class TextJob final : public InferenceJob {
 public:
  // Writes one example's result from its outputs and the text as the model read it; may
  // throw.
  using Writer = std::function<absl::Status(const NamedTensors& outputs, const TokenizedText& text)>;
  // Receives the final status and finishes the request; must not throw.
  using Done = std::function<void(absl::Status)>;
  // Makes the explanation's collector for the text's pieces (INVALID_ARGUMENT when the
  // request's options do not fit them, e.g. a query token past the end).
  using CollectorFor =
      std::function<absl::StatusOr<std::shared_ptr<MapCollector>>(const TokenizedText& text)>;

  // `text` must outlive the job (it views the request); `tokenizer` is the task's.
  TextJob(std::string_view text, std::shared_ptr<const TextTokenizer> tokenizer, Writer write,
          Done done, std::optional<CollectorFor> explanation = std::nullopt);

  bool explains() const override { return explanation_.has_value(); }
  absl::StatusOr<at::Tensor> Prepare() override;
  absl::StatusOr<ExplainPass> BeginExplain() override;
  void Finish(absl::StatusOr<NamedTensors> outputs) override;

 private:
  const std::string_view text_;
  const std::shared_ptr<const TextTokenizer> tokenizer_;
  const Writer write_;
  const Done done_;
  const std::optional<CollectorFor> explanation_;
  // Written by Prepare and read by BeginExplain and Finish, all on the worker thread.
  TokenizedText tokens_;
  std::shared_ptr<MapCollector> collector_;
};

}  // namespace gatescope
