// The job of a text model's request, for both APIs: it tokenizes its text before it is
// queued (PrepareAhead: on the receiving thread for a text of at most
// kTokenizeOnCallerBytes, else on a preparation thread), so the model's worker only runs
// forwards (Prepare: the example is the piece ids, INT64 [T]), runs an explanation pass
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

// The piece ids of `text`, INT64 [T]: a text job's example.
at::Tensor PieceIds(const TokenizedText& text);

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
  // `call_text_bytes`: the bytes of every text of the call the job belongs to (a KServe
  // call may carry several, all tokenized one after another by the thread that receives
  // it when their total is small).
  TextJob(std::string_view text, size_t call_text_bytes,
          std::shared_ptr<const TextTokenizer> tokenizer, Writer write, Done done,
          std::optional<CollectorFor> explanation = std::nullopt);

  // Tokenizing runs at roughly 10 MB/s (docs/performance.md): up to this many bytes per
  // call it costs less than a hop to a preparation thread and holds a gRPC thread well
  // under a millisecond.
  static constexpr size_t kTokenizeOnCallerBytes = 4096;

  bool explains() const override { return explanation_.has_value(); }
  bool prepares_ahead() const override { return true; }
  bool prepares_on_caller() const override { return on_caller_; }
  absl::Status PrepareAhead() override;  // tokenizes
  // The piece ids; tokenizes first if PrepareAhead did not run (a scheduler that does not
  // prepare ahead).
  absl::StatusOr<at::Tensor> Prepare() override;
  absl::StatusOr<ExplainPass> BeginExplain() override;
  void Finish(absl::StatusOr<NamedTensors> outputs) override;

 private:
  const std::string_view text_;
  const bool on_caller_;
  const std::shared_ptr<const TextTokenizer> tokenizer_;
  const Writer write_;
  const Done done_;
  const std::optional<CollectorFor> explanation_;
  // Written by PrepareAhead (before queuing; the queue's hand-off publishes it to the
  // worker) or else by Prepare, and read by BeginExplain and Finish (on the worker, or on
  // a reply thread after ModelInstance's hand-off).
  bool tokenized_ = false;
  TokenizedText tokens_;
  std::shared_ptr<MapCollector> collector_;
};

}  // namespace gatescope
