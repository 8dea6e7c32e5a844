#include "server/tasks/image_job.h"

#include <utility>

#include "server/tasks/guarded.h"

namespace gatescope {

ImageJob::ImageJob(ImageInput input, Writer write, Done done,
                   std::optional<Explanation> explanation)
    : make_(std::move(input.make)),
      shape_key_(input.shape_key),
      write_(std::move(write)),
      done_(std::move(done)),
      explanation_(std::move(explanation)),
      ahead_(input.ahead),
      on_caller_(input.ahead && input.on_caller) {}

absl::Status ImageJob::PrepareAhead() {
  example_ = Guarded("preparing the input", [&] { return make_(&size_); });
  return example_->status();
}

absl::StatusOr<at::Tensor> ImageJob::Prepare() {
  if (!example_) return make_(&size_);
  absl::StatusOr<at::Tensor> example = *std::move(example_);
  example_.reset();
  return example;
}

absl::StatusOr<ExplainPass> ImageJob::BeginExplain() {
  if (!explanation_) return absl::InternalError("not an explanation job");
  MapCollector* collector = explanation_->collector.get();
  if (absl::Status st = collector->CheckBudget(size_); !st.ok()) return st;
  ExplainPass pass;
  pass.layers = collector->layers();
  if (explanation_->args) {
    auto args = explanation_->args(size_);
    if (!args.ok()) return args.status();
    pass.args = *std::move(args);
  }
  pass.visit = [collector](int layer, const NamedTensors& maps) {
    return collector->AddLayer(layer, maps);
  };
  return pass;
}

void ImageJob::Finish(absl::StatusOr<NamedTensors> outputs) {
  absl::Status st = outputs.status();
  if (st.ok()) st = Guarded("postprocessing", [&] { return write_(*outputs, size_); });
  done_(st);
}

}  // namespace gatescope
