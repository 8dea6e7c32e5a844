// The one job class of the image tasks, for both APIs: it builds its example (remembering
// the input's size) ahead of queuing when its input says so, otherwise on the worker, runs an explanation pass when it carries one,
// and hands the outputs with that size to its writer. Writing is guarded, so an exception
// becomes INTERNAL and the request still finishes exactly once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/image_size.h"
#include "server/explain/map_collector.h"
#include "server/tasks/image_inputs.h"
#include "server/tasks/inference_job.h"

namespace gatescope {

class ImageJob final : public InferenceJob {
 public:
  // Writes one example's result (into a response, or a KServe results slot) from its
  // outputs and the input's size; may throw.
  using Writer = std::function<absl::Status(const NamedTensors& outputs, ImageSize size)>;
  // Receives the final status and finishes the request; must not throw.
  using Done = std::function<void(absl::Status)>;

  // What an explanation pass needs: the collector that receives the maps (its byte budget
  // is checked against the input's size before the pass runs) and, optionally, the extra
  // arguments of the pass's start for an input of that size (e.g. a query point).
  struct Explanation {
    std::shared_ptr<MapCollector> collector;
    std::function<absl::StatusOr<std::vector<double>>(ImageSize size)> args;
  };

  ImageJob(ImageInput input, Writer write, Done done,
           std::optional<Explanation> explanation = std::nullopt);

  bool explains() const override { return explanation_.has_value(); }
  uint64_t shape_key() const override { return shape_key_; }
  bool prepares_ahead() const override { return ahead_; }
  bool prepares_on_caller() const override { return on_caller_; }
  absl::Status PrepareAhead() override;
  absl::StatusOr<at::Tensor> Prepare() override;
  absl::StatusOr<ExplainPass> BeginExplain() override;
  void Finish(absl::StatusOr<NamedTensors> outputs) override;

 private:
  const ImageMaker make_;
  const uint64_t shape_key_;
  const Writer write_;
  const Done done_;
  const std::optional<Explanation> explanation_;
  const bool ahead_;
  const bool on_caller_;
  // Written by PrepareAhead (preparation thread) or Prepare, read later on the worker
  // thread (or a reply thread, after ModelInstance's hand-off); the batcher's queue
  // orders the threads.
  std::optional<absl::StatusOr<at::Tensor>> example_;
  ImageSize size_;
};

}  // namespace gatescope
