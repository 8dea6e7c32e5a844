// Task "image_segmentation": forward() returns "logits" [B, classes, H, W] at the model's
// size; the class map comes back at the input's own size (mask, class pixel counts,
// optional PNG and probabilities). Explanations are each decoder stage's gate map and the
// attention of a query pixel (gatescope.v1 Explain only). KServe adds the "mask" output:
// UINT8 [B, H0, W0] class indices at the input's size.
#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/api/tensor_proto.h"
#include "server/explain/dense_maps.h"
#include "server/postprocess/segmentation.h"
#include "server/tasks/image_tasks.h"
#include "server/tasks/task_registry.h"

namespace gatescope {
namespace {

constexpr char kMaskOutput[] = "mask";

absl::Status CheckExplainRequest(const v1::ExplainRequest& r) {
  if (r.has_query_pixel() && (r.query_pixel().y() < 0 || r.query_pixel().x() < 0)) {
    return absl::InvalidArgumentError("query_pixel must not be negative");
  }
  return absl::OkStatus();
}

// The model's query point for `pixel` of an input of `size`: {(y + 0.5) / H0,
// (x + 0.5) / W0}, each in (0, 1). INVALID_ARGUMENT when the pixel is outside the input.
absl::StatusOr<std::vector<double>> QueryPoint(const v1::QueryPixel& pixel, ImageSize size) {
  if (pixel.y() < 0 || pixel.x() < 0 || pixel.y() >= size.height || pixel.x() >= size.width) {
    return absl::InvalidArgumentError(absl::StrCat("query_pixel (y=", pixel.y(), ", x=", pixel.x(),
                                                   ") is outside the ", size.height, "x",
                                                   size.width, " input"));
  }
  return std::vector<double>{(pixel.y() + 0.5) / static_cast<double>(size.height),
                             (pixel.x() + 0.5) / static_cast<double>(size.width)};
}

DenseMapLayout DenseLayoutOf(const ModelConfig& config) {
  DenseMapLayout layout;
  layout.stages = config.layers();
  layout.has_attention = DeclaresMap(config, "attention");
  layout.has_gate = DeclaresMap(config, "gate");
  layout.height = config.input().shape(1);
  layout.width = config.input().shape(2);
  return layout;
}

// One example's class map at `size` from its "logits" [classes, H, W].
absl::StatusOr<SegmentationResult> Segment(const NamedTensors& outputs, ImageSize size,
                                           const SegmentationOptions& options) {
  auto logits = outputs.find("logits");
  if (logits == outputs.end()) return absl::InternalError("model returned no 'logits'");
  return SegmentLogits(logits->second, size.height, size.width, options);
}

absl::Status FillSegmentation(const NamedTensors& outputs, ImageSize size,
                              const SegmentationOptions& options, v1::Segmentation* out) {
  auto seg = Segment(outputs, size, options);
  if (!seg.ok()) return seg.status();
  ToUint8Proto(seg->mask, out->mutable_mask());
  for (int64_t n : seg->class_pixels) out->add_class_pixels(n);
  if (seg->probabilities.defined()) ToFloatProto(seg->probabilities, out->mutable_probabilities());
  if (options.png) out->set_mask_png(std::move(seg->png));
  return absl::OkStatus();
}

class SegmentationTask final : public ImageTask {
 public:
  SegmentationTask(ModelConfig config, TaskOptions options)
      : ImageTask(std::move(config), options) {
    classes_.classes = this->config().labels_size();
    classes_.max_bytes = this->options().response_max_bytes;
  }

  absl::StatusOr<JobPlan> PlanPrediction(const v1::PredictRequest& request,
                                         v1::PredictResponse* response) const override {
    if (request.top_k() < 0) return absl::InvalidArgumentError("top_k must be >= 0");
    SegmentationOptions options = classes_;
    options.png = request.mask_png();
    options.probabilities = request.class_probabilities();
    return JobPlan{ImageJob::Writer([response, options](const NamedTensors& outputs, ImageSize size) {
      return FillSegmentation(outputs, size, options, response->mutable_segmentation());
    }), std::nullopt};
  }

  absl::StatusOr<JobPlan> PlanExplanation(const v1::ExplainRequest& request,
                                          v1::ExplainResponse* response) const override {
    if (absl::Status st = CheckExplainRequest(request); !st.ok()) return st;
    DenseMapOptions map_options{request.gates(), request.has_query_pixel()};
    auto created = DenseMapCollector::Create(DenseLayoutOf(config()), map_options,
                                             options().explain_max_bytes);
    if (!created.ok()) return created.status();
    std::shared_ptr<DenseMapCollector> collector = *std::move(created);
    auto write = [response, collector, options = classes_](const NamedTensors& outputs,
                                                           ImageSize size) -> absl::Status {
      auto st = FillSegmentation(outputs, size, options, response->mutable_segmentation());
      if (!st.ok()) return st;
      auto maps = collector->Finish();
      if (!maps.ok()) return maps.status();
      for (const auto& g : maps->gates) ToFloatProto(g, response->add_gates());
      for (const auto& a : maps->query_attention) ToFloatProto(a, response->add_query_attention());
      return absl::OkStatus();
    };
    // Without a query pixel the model still takes a point; its attention map is dropped.
    auto args = [&request](ImageSize size) -> absl::StatusOr<std::vector<double>> {
      if (!request.has_query_pixel()) return std::vector<double>{0.5, 0.5};
      return QueryPoint(request.query_pixel(), size);
    };
    return JobPlan{std::move(write), ImageJob::Explanation{std::move(collector), std::move(args)}};
  }

  absl::StatusOr<InferWork> PlanInfer(const ::inference::ModelInferRequest& request) const override {
    InferWork work;
    // The call's examples share the response cap.
    SegmentationOptions options = classes_;
    const int64_t examples = request.inputs_size() > 0 && request.inputs(0).shape_size() > 0
                                 ? std::max<int64_t>(1, request.inputs(0).shape(0))
                                 : 1;
    options.max_bytes = classes_.max_bytes / examples;
    work.known = [this](std::string_view name) {
      return DeclaresOutput(config(), name) || name == kMaskOutput;
    };
    work.per_example = [options]() -> absl::StatusOr<ExampleWork> {
      ExampleWork one;
      one.extend = [options](NamedTensors& outputs, ImageSize size) -> absl::Status {
        auto seg = Segment(outputs, size, options);
        if (!seg.ok()) return seg.status();
        outputs.insert_or_assign(kMaskOutput, seg->mask);
        return absl::OkStatus();
      };
      return one;
    };
    return work;
  }

  // "logits" [classes, H, W], "mask" UINT8 [H0, W0] (-1 for models of any size).
  std::vector<DeclaredTensor> DeclaredOutputs() const override {
    const auto& in = config().input();
    std::vector<DeclaredTensor> out;
    for (const auto& name : config().outputs()) {
      out.push_back(Float32(name, name == "logits" ? std::vector<int64_t>{config().labels_size(),
                                                                          in.shape(1), in.shape(2)}
                                                   : std::vector<int64_t>{config().layers()}));
    }
    out.push_back({kMaskOutput, "UINT8", ::inference::TYPE_UINT8,
                   in.any_size() ? std::vector<int64_t>{-1, -1}
                                 : std::vector<int64_t>{in.shape(1), in.shape(2)}});
    return out;
  }

 private:
  SegmentationOptions classes_;  // the model's label count; nothing else asked
};

// Also INVALID_ARGUMENT unless there are 2..256 labels (masks are UINT8) and the declared
// maps are among "attention" and "gate".
absl::StatusOr<std::unique_ptr<Task>> Create(const ModelConfig& config, const TaskOptions& options,
                                             const ArchiveReader&) {
  auto normalised = ImageTask::WithImageInput(config);
  if (!normalised.ok()) return normalised.status();
  if (config.labels_size() < 2 || config.labels_size() > 256) {
    return absl::InvalidArgumentError(
        "model config: image_segmentation needs 2..256 labels (masks are UINT8 class indices)");
  }
  for (const auto& kind : config.maps()) {
    if (kind != "attention" && kind != "gate") {
      return absl::InvalidArgumentError(absl::StrCat(
          "model config: image_segmentation maps are 'attention' and 'gate', not '", kind, "'"));
    }
  }
  return std::unique_ptr<Task>(std::make_unique<SegmentationTask>(*std::move(normalised), options));
}

std::vector<std::string> NoParameters() { return {}; }

std::vector<std::string> V1Fields() { return {"gates", "query_pixel"}; }

}  // namespace

extern const TaskEntry kSegmentationTask{"image_segmentation", Create, NoParameters, V1Fields};

}  // namespace gatescope
