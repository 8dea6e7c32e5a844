#include "server/tasks/segmentation_task.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/api/tensor_proto.h"
#include "server/explain/dense_maps.h"
#include "server/postprocess/segmentation.h"
#include "server/tasks/v1_fields.h"

namespace gatescope {
namespace {

absl::Status CheckExplainRequest(const v1::ExplainRequest& r) {
  if (absl::Status st = RefuseDetectionFields(r); !st.ok()) return st;
  const char* what = ClassifierExplainOption(r);
  if (what == nullptr && r.plug_gates()) what = "plug_gates";
  if (what != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not available for segmentation models (ask for gates and/or query_pixel)"));
  }
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

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> SegmentationTask::Create(const ModelConfig& config,
                                                               const TaskOptions& options) {
  ModelConfig normalised = config;
  if (absl::Status st = NormaliseImageInput(*normalised.mutable_input()); !st.ok()) return st;
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
  return std::unique_ptr<Task>(new SegmentationTask(std::move(normalised), options));
}

absl::StatusOr<std::unique_ptr<InferenceJob>> SegmentationTask::Predict(
    const v1::PredictRequest& request, v1::PredictResponse* response, CallDone done) const {
  auto make = V1ImageInput(request, config().input());
  if (!make.ok()) return make.status();
  if (request.top_k() < 0) return absl::InvalidArgumentError("top_k must be >= 0");
  if (absl::Status st = RefuseDetectionFields(request); !st.ok()) return st;
  SegmentationOptions options;
  options.png = request.mask_png();
  options.probabilities = request.class_probabilities();
  options.classes = config().labels_size();
  auto write = [response, options](const NamedTensors& outputs, ImageSize size) {
    return FillSegmentation(outputs, size, options, response->mutable_segmentation());
  };
  return std::unique_ptr<InferenceJob>(
      std::make_unique<ImageJob>(*std::move(make), std::move(write), std::move(done)));
}

absl::StatusOr<std::unique_ptr<InferenceJob>> SegmentationTask::Explain(
    const v1::ExplainRequest& request, v1::ExplainResponse* response, CallDone done) const {
  auto make = V1ImageInput(request, config().input());
  if (!make.ok()) return make.status();
  if (absl::Status st = CheckExplainRequest(request); !st.ok()) return st;
  DenseMapOptions map_options;
  map_options.gates = request.gates();
  map_options.query_attention = request.has_query_pixel();
  auto created = DenseMapCollector::Create(DenseLayoutOf(config()), map_options,
                                           options().explain_max_bytes);
  if (!created.ok()) return created.status();
  std::shared_ptr<DenseMapCollector> collector = *std::move(created);
  if (absl::Status st = collector->CheckBudget(model_size()); !st.ok()) return st;
  SegmentationOptions seg_options;
  seg_options.classes = config().labels_size();
  auto write = [response, collector, seg_options](const NamedTensors& outputs,
                                                  ImageSize size) -> absl::Status {
    auto st = FillSegmentation(outputs, size, seg_options, response->mutable_segmentation());
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
  return std::unique_ptr<InferenceJob>(std::make_unique<ImageJob>(
      *std::move(make), std::move(write), std::move(done),
      ImageJob::Explanation{std::move(collector), std::move(args)}));
}

absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> SegmentationTask::Infer(
    const ::inference::ModelInferRequest& request,
    const std::shared_ptr<InferResults>& results) const {
  auto known = [this](std::string_view name) {
    return DeclaresOutput(config(), name) || name == kMaskOutput;
  };
  auto makers = KServeExamples(request, results, known);
  if (!makers.ok()) return makers.status();
  SegmentationOptions options;
  options.classes = config().labels_size();
  auto add_mask = [options](NamedTensors& outputs, ImageSize size) -> absl::Status {
    auto seg = Segment(outputs, size, options);
    if (!seg.ok()) return seg.status();
    outputs.insert_or_assign(kMaskOutput, seg->mask);
    return absl::OkStatus();
  };
  std::vector<std::unique_ptr<InferenceJob>> jobs;
  for (size_t i = 0; i < makers->size(); ++i) {
    jobs.push_back(KServeJob(std::move((*makers)[i]), i, results, add_mask));
  }
  return jobs;
}

KServeSignature SegmentationTask::Signature() const {
  const auto& in = config().input();
  KServeSignature s;
  s.input = InputTensor();
  s.format = ::inference::ModelInput::FORMAT_NCHW;
  for (const auto& name : config().outputs()) {
    s.outputs.push_back(Float32(name, name == "logits"
                                          ? std::vector<int64_t>{config().labels_size(),
                                                                 in.shape(1), in.shape(2)}
                                          : std::vector<int64_t>{config().layers()}));
  }
  s.outputs.push_back({kMaskOutput, "UINT8", ::inference::TYPE_UINT8,
                       in.any_size() ? std::vector<int64_t>{-1, -1}
                                     : std::vector<int64_t>{in.shape(1), in.shape(2)}});
  return s;
}

}  // namespace gatescope
