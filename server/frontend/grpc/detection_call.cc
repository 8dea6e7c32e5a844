#include "server/frontend/grpc/detection_call.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/explain/detection_maps.h"
#include "server/frontend/grpc/request_input.h"
#include "server/frontend/grpc/tensor_proto.h"

namespace gatescope {
namespace {

using ::gatescope::v1::ExplainRequest;
using ::gatescope::v1::ExplainResponse;

// The other tasks' explain options, which a detection model cannot serve.
absl::Status CheckDetectionRequest(const ExplainRequest& r) {
  const char* what = ClassifierExplainOption(r);
  if (what == nullptr && r.gates()) what = "gates";
  if (what == nullptr && r.has_query_pixel()) what = "query_pixel";
  if (what != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not available for detection models (sampling points are always returned; "
              "ask for plug_gates, score_threshold, max_detections)"));
  }
  return absl::OkStatus();
}

DetectionMapLayout LayoutOf(const ModelConfig& config) {
  const v1::DetectionConfig& d = config.detection();
  DetectionMapLayout layout;
  layout.encoder_layers = d.encoder_layers();
  layout.decoder_layers = d.decoder_layers();
  layout.heads = config.heads();
  layout.levels = d.levels();
  layout.points = d.points();
  layout.queries = d.queries();
  for (const auto& kind : config.maps()) {
    layout.has_sampling_points |= kind == "sampling_points";
    layout.has_plug_gate |= kind == "plug_gate";
  }
  return layout;
}

void FillMaps(const DetectionExplanation& ex, ExplainResponse* response) {
  for (size_t i = 0; i < ex.detections.size(); ++i) {
    const DetectionMapsOf& maps = ex.detections[i];
    v1::DetectionMaps* out = response->add_detection_maps();
    out->set_detection(static_cast<int32_t>(i));
    ToFloatProto(maps.sampling_points, out->mutable_sampling_points());
    ToFloatProto(maps.attention_weights, out->mutable_attention_weights());
    if (maps.plug_gate.defined()) ToFloatProto(maps.plug_gate, out->mutable_plug_gate());
  }
  for (const at::Tensor& g : ex.encoder_plug_gates) {
    ToFloatProto(g, response->add_encoder_plug_gates());
  }
}

}  // namespace

absl::StatusOr<DetectionOptions> RequestDetectionOptions(const ModelConfig& config,
                                                         std::optional<float> score_threshold,
                                                         int64_t max_detections) {
  if (!IsDetection(config)) {
    if (score_threshold.has_value() || max_detections != 0) {
      return absl::InvalidArgumentError(
          "score_threshold and max_detections apply to detection models only");
    }
    return DetectionOptions{};
  }
  return ResolveDetectionOptions(config.detection(), score_threshold, max_detections);
}

absl::StatusOr<std::vector<Detection>> DetectionsOf(const NamedTensors& outputs, ImageSize size,
                                                    const DetectionOptions& options,
                                                    const ModelConfig& config) {
  auto logits = outputs.find("logits");
  auto boxes = outputs.find("boxes");
  if (logits == outputs.end() || boxes == outputs.end()) {
    return absl::InternalError("detection model returned no 'logits' or no 'boxes'");
  }
  const int64_t queries = config.detection().queries();
  if (logits->second.dim() != 2 || logits->second.size(0) != queries ||
      logits->second.size(1) != config.labels_size()) {
    return absl::InternalError(absl::StrCat("detection logits must be [", queries, ", ",
                                            config.labels_size(), "] as the metadata says"));
  }
  return DecodeDetections(logits->second, boxes->second, size.height, size.width, options);
}

absl::StatusOr<std::vector<Detection>> FillDetections(
    const NamedTensors& outputs, ImageSize size, const DetectionOptions& options,
    const ModelConfig& config, google::protobuf::RepeatedPtrField<v1::Detection>* out) {
  auto detections = DetectionsOf(outputs, size, options, config);
  if (!detections.ok()) return detections.status();
  for (const Detection& d : *detections) {
    v1::Detection* p = out->Add();
    p->set_x1(d.x1);
    p->set_y1(d.y1);
    p->set_x2(d.x2);
    p->set_y2(d.y2);
    p->set_score(d.score);
    p->set_label_index(static_cast<int32_t>(d.label));
    p->set_label(config.labels(static_cast<int>(d.label)));
    p->set_query(static_cast<int32_t>(d.query));
  }
  return detections;
}

void ExplainDetection(grpc::CallbackServerContext* context, const ModelCall& call,
                      const ExplainRequest* request, ExplainResponse* response,
                      int64_t max_bytes) {
  const std::shared_ptr<ServedModel> model = call.model;
  absl::Status st = CheckDetectionRequest(*request);
  absl::StatusOr<DetectionOptions> options =
      st.ok() ? DetectionOptionsOf(model->config, *request) : absl::StatusOr<DetectionOptions>(st);
  DetectionMapOptions map_options;
  map_options.plug_gates = request->plug_gates();
  absl::StatusOr<std::unique_ptr<DetectionMapCollector>> created =
      options.ok() ? DetectionMapCollector::Create(LayoutOf(model->config), map_options, max_bytes)
                   : absl::StatusOr<std::unique_ptr<DetectionMapCollector>>(options.status());
  if (!created.ok()) {
    call.Finish(created.status());
    return;
  }
  std::shared_ptr<DetectionMapCollector> collector = *std::move(created);
  // Written by make_input, read by done: both on the worker thread, in that order.
  auto size = std::make_shared<ImageSize>();
  WorkItem item = ExplainPassItem(request, model, size,
                                  [collector](int layer, const NamedTensors& maps) {
                                    return collector->AddLayer(layer, maps);
                                  });
  item.done = [call, response, collector, size,
               options = *options](absl::StatusOr<NamedTensors> outputs) {
    absl::Status st = outputs.status();
    try {
      absl::StatusOr<std::vector<Detection>> detections =
          st.ok() ? FillDetections(*outputs, *size, options, call.model->config,
                                   response->mutable_detections())
                  : absl::StatusOr<std::vector<Detection>>(st);
      absl::StatusOr<DetectionExplanation> ex =
          detections.ok() ? collector->Finish(*detections, size->height, size->width)
                          : absl::StatusOr<DetectionExplanation>(detections.status());
      st = ex.status();
      if (st.ok()) {
        response->set_model_name(call.model->name);
        response->set_model_version(call.model->version);
        FillMaps(*ex, response);
      }
    } catch (const std::exception& e) {
      st = absl::InternalError(absl::StrCat("explanation failed: ", e.what()));
    }
    call.Finish(st);
  };
  Submit(call, context, std::move(item));
}

}  // namespace gatescope
