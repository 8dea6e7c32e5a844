#include "server/frontend/grpc/segmentation_call.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/frontend/grpc/request_input.h"
#include "server/frontend/grpc/tensor_proto.h"

namespace gatescope {
namespace {

using ::gatescope::v1::ExplainRequest;
using ::gatescope::v1::ExplainResponse;

// The classifiers' explain options, which a segmentation model cannot serve.
absl::Status CheckSegmentationRequest(const ExplainRequest& r) {
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

}  // namespace

absl::Status FillSegmentation(const NamedTensors& outputs, ImageSize size,
                              const SegmentationOptions& options, v1::Segmentation* out) {
  auto logits = outputs.find("logits");
  if (logits == outputs.end()) return absl::InternalError("model returned no 'logits'");
  auto seg = SegmentLogits(logits->second, size.height, size.width, options);
  if (!seg.ok()) return seg.status();
  ToUint8Proto(seg->mask, out->mutable_mask());
  for (int64_t n : seg->class_pixels) out->add_class_pixels(n);
  if (seg->probabilities.defined()) ToFloatProto(seg->probabilities, out->mutable_probabilities());
  if (options.png) out->set_mask_png(std::move(seg->png));
  return absl::OkStatus();
}

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
  for (const auto& kind : config.maps()) {
    layout.has_attention |= kind == "attention";
    layout.has_gate |= kind == "gate";
  }
  layout.height = config.input().shape(1);
  layout.width = config.input().shape(2);
  return layout;
}

void ExplainSegmentation(grpc::CallbackServerContext* context, const ModelCall& call,
                         const ExplainRequest* request, ExplainResponse* response,
                         int64_t max_bytes) {
  const std::shared_ptr<ServedModel> model = call.model;
  absl::Status st = CheckSegmentationRequest(*request);
  DenseMapOptions options;
  options.gates = request->gates();
  options.query_attention = request->has_query_pixel();
  absl::StatusOr<std::unique_ptr<DenseMapCollector>> created =
      st.ok() ? DenseMapCollector::Create(DenseLayoutOf(model->config), options, max_bytes)
              : absl::StatusOr<std::unique_ptr<DenseMapCollector>>(st);
  if (!created.ok()) {
    call.Finish(created.status());
    return;
  }
  std::shared_ptr<DenseMapCollector> collector = *std::move(created);
  // Filled by make_input, read by explain_args and done: all on the worker thread, in order.
  auto size = std::make_shared<ImageSize>();
  WorkItem item = ExplainPassItem(request, model, size,
                                  [collector](int stage, const NamedTensors& maps) {
                                    return collector->AddStage(stage, maps);
                                  });
  item.explain_args = [request, size]() -> absl::StatusOr<std::vector<double>> {
    // Without a query pixel the model still takes a point; its attention map is dropped.
    if (!request->has_query_pixel()) return std::vector<double>{0.5, 0.5};
    return QueryPoint(request->query_pixel(), *size);
  };
  item.done = [call, response, collector, size](absl::StatusOr<NamedTensors> outputs) {
    absl::Status st = outputs.status();
    try {
      if (st.ok()) {
        response->set_model_name(call.model->name);
        response->set_model_version(call.model->version);
        SegmentationOptions options;
        options.classes = call.model->config.labels_size();
        st = FillSegmentation(*outputs, *size, options, response->mutable_segmentation());
      }
      absl::StatusOr<DenseMaps> maps =
          st.ok() ? collector->Finish() : absl::StatusOr<DenseMaps>(st);
      st = maps.status();
      if (st.ok()) {
        for (const auto& g : maps->gates) ToFloatProto(g, response->add_gates());
        for (const auto& a : maps->query_attention)
          ToFloatProto(a, response->add_query_attention());
      }
    } catch (const std::exception& e) {
      st = absl::InternalError(absl::StrCat("explanation failed: ", e.what()));
    }
    call.Finish(st);
  };
  Submit(call, context, std::move(item));
}

}  // namespace gatescope
