#include "server/frontend/grpc/inference_service.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/frontend/grpc/detection_call.h"
#include "server/frontend/grpc/explain_call.h"
#include "server/frontend/grpc/model_call.h"
#include "server/frontend/grpc/request_input.h"
#include "server/frontend/grpc/segmentation_call.h"
#include "server/frontend/grpc/status_mapping.h"
#include "server/frontend/grpc/tensor_proto.h"
#include "server/explain/explanation.h"
#include "server/explain/heatmap.h"
#include "server/postprocess/classification.h"

namespace gatescope {
namespace {

using ::gatescope::v1::PredictRequest;
using ::gatescope::v1::PredictResponse;

constexpr int kDefaultTopK = 5;

template <typename Response>
absl::Status FillClasses(const ServedModel& model, const NamedTensors& outputs, int top_k,
                         Response* response) {
  auto logits = outputs.find("logits");
  if (logits == outputs.end()) return absl::InternalError("model returned no 'logits'");
  auto classes = TopKClasses(logits->second, model.config.labels(), top_k);
  if (!classes.ok()) return classes.status();
  response->set_model_name(model.name);
  response->set_model_version(model.version);
  for (const auto& c : *classes) {
    auto* out = response->add_classes();
    out->set_label(c.label);
    out->set_index(c.index);
    out->set_probability(c.probability);
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* InferenceService::Predict(grpc::CallbackServerContext* context,
                                                    const PredictRequest* request,
                                                    PredictResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto call = BeginModelCall(reactor, *repository_, request->model_name(),
                             request->model_version(), shutting_down_.load());
  if (!call) return reactor;
  const bool is_image = request->input_case() == PredictRequest::kImage;
  absl::Status st = CheckInput(request->input_case() != PredictRequest::INPUT_NOT_SET, is_image,
                               request->image(), request->tensor());
  if (st.ok() && request->top_k() < 0) st = absl::InvalidArgumentError("top_k must be >= 0");
  std::shared_ptr<ServedModel> model = call->model;
  absl::StatusOr<DetectionOptions> det_options =
      st.ok() ? DetectionOptionsOf(model->config, *request) : absl::StatusOr<DetectionOptions>(st);
  if (!det_options.ok()) {
    call->Finish(det_options.status());
    return call->reactor;
  }
  const int top_k = request->top_k() == 0 ? kDefaultTopK : request->top_k();
  const bool segmentation = IsSegmentation(model->config);
  const bool detection = IsDetection(model->config);
  SegmentationOptions seg_options;
  seg_options.png = request->mask_png();
  seg_options.probabilities = request->class_probabilities();
  seg_options.classes = model->config.labels_size();
  // The size masks and boxes map back to: written by make_input, read by done, both on
  // the worker thread, in that order.
  auto size = std::make_shared<ImageSize>();
  WorkItem item;
  item.make_input = [request, model, is_image, size] {
    return MakeInput(is_image, request->image(), request->tensor(), model->config.input(),
                     size.get());
  };
  item.done = [call = *call, response, top_k, segmentation, seg_options, detection,
               det_options = *det_options, size](absl::StatusOr<NamedTensors> outputs) {
    absl::Status st = outputs.status();
    if (st.ok()) {
      try {
        if (detection) {
          response->set_model_name(call.model->name);
          response->set_model_version(call.model->version);
          st = FillDetections(*outputs, *size, det_options, call.model->config,
                              response->mutable_detections())
                   .status();
        } else if (segmentation) {
          response->set_model_name(call.model->name);
          response->set_model_version(call.model->version);
          st = FillSegmentation(*outputs, *size, seg_options, response->mutable_segmentation());
        } else {
          st = FillClasses(*call.model, *outputs, top_k, response);
        }
      } catch (const std::exception& e) {
        st = absl::InternalError(absl::StrCat("postprocessing failed: ", e.what()));
      }
    }
    call.Finish(st);
  };
  item.priority = static_cast<int>(std::min<uint32_t>(request->priority(), 1u << 20));
  item.timeout = absl::Microseconds(
      static_cast<int64_t>(std::min<uint64_t>(request->timeout_microseconds(), 1ull << 40)));
  Submit(*call, context, std::move(item));
  return call->reactor;
}

grpc::ServerUnaryReactor* InferenceService::Explain(grpc::CallbackServerContext* context,
                                                    const v1::ExplainRequest* request,
                                                    v1::ExplainResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto call = BeginModelCall(reactor, *repository_, request->model_name(),
                             request->model_version(), shutting_down_.load());
  if (!call) return reactor;
  std::shared_ptr<ServedModel> model = call->model;
  const bool is_image = request->input_case() == v1::ExplainRequest::kImage;
  absl::Status st = CheckInput(request->input_case() != v1::ExplainRequest::INPUT_NOT_SET,
                               is_image, request->image(), request->tensor());
  // Refuses the detection fields on other models.
  if (st.ok() && !IsDetection(model->config)) st = DetectionOptionsOf(model->config, *request).status();
  if (st.ok() && IsSegmentation(model->config)) {
    ExplainSegmentation(context, *call, request, response, explain_max_bytes_);
    return call->reactor;
  }
  if (st.ok() && IsDetection(model->config)) {
    ExplainDetection(context, *call, request, response, explain_max_bytes_);
    return call->reactor;
  }
  if (st.ok() && request->has_query_pixel()) {
    st = absl::InvalidArgumentError("query_pixel applies to segmentation models only");
  }
  if (st.ok() && request->heatmap_png() && !(is_image && request->rollout())) {
    st = absl::InvalidArgumentError("heatmap_png needs an image input and rollout");
  }
  if (st.ok() && request->top_k() < 0) st = absl::InvalidArgumentError("top_k must be >= 0");
  ExplainOptions options;
  options.rollout = request->rollout();
  options.gates = request->gates();
  options.resonance = request->resonance();
  options.plug_gates = request->plug_gates();
  options.attention_layers.assign(request->attention_layers().begin(),
                                  request->attention_layers().end());
  options.attention_heads.assign(request->attention_heads().begin(),
                                 request->attention_heads().end());
  options.attention_queries.assign(request->attention_queries().begin(),
                                   request->attention_queries().end());
  const auto& ro = request->rollout_options();
  if (!ro.head_fusion().empty()) options.rollout_options.head_fusion = ro.head_fusion();
  if (!ro.signed_maps().empty()) options.rollout_options.signed_maps = ro.signed_maps();
  options.rollout_options.discard_ratio = ro.discard_ratio();
  options.rollout_options.start_layer = ro.start_layer();
  absl::StatusOr<std::shared_ptr<ExplanationBuilder>> builder =
      st.ok() ? StartExplanation(*model, options, explain_max_bytes_)
              : absl::StatusOr<std::shared_ptr<ExplanationBuilder>>(st);
  if (!builder.ok()) {
    call->Finish(builder.status());
    return call->reactor;
  }
  const int top_k = request->top_k() == 0 ? kDefaultTopK : request->top_k();
  WorkItem item;
  item.shape_key = 1;  // never formed into a batch with predictions
  item.make_input = [request, model, is_image] {
    return MakeInput(is_image, request->image(), request->tensor(), model->config.input());
  };
  AttachExplanation(*builder, model->config.layers(), item);
  item.done = [call = *call, request, response, builder = *builder, top_k,
               is_image](absl::StatusOr<NamedTensors> outputs) {
    const ServedModel* model = call.model.get();
    absl::Status st = outputs.status();
    try {
      if (st.ok()) st = FillClasses(*model, *outputs, top_k, response);
      absl::StatusOr<Explanation> ex =
          st.ok() ? builder->Finish() : absl::StatusOr<Explanation>(st);
      if (st.ok()) st = ex.status();
      if (st.ok()) {
        if (ex->rollout.defined()) ToFloatProto(ex->rollout, response->mutable_rollout());
        for (const auto& g : ex->gates) ToFloatProto(g, response->add_gates());
        for (const auto& a : ex->attention) ToFloatProto(a, response->add_attention());
        for (const auto& r : ex->resonance) ToFloatProto(r, response->add_resonance());
        if (ex->vigilance.defined()) ToFloatProto(ex->vigilance, response->mutable_vigilance());
        for (const auto& r : ex->attention_resonance) {
          ToFloatProto(r, response->add_attention_resonance());
        }
        for (const auto& g : ex->plug_gates) ToFloatProto(g, response->add_plug_gates());
        if (request->heatmap_png() && is_image) {
          auto png = RenderOverlayPng(ex->rollout, request->image());
          if (png.ok()) {
            response->set_rollout_png(*std::move(png));
          } else {
            st = png.status();
          }
        }
      }
    } catch (const std::exception& e) {
      st = absl::InternalError(absl::StrCat("explanation failed: ", e.what()));
    }
    call.Finish(st);
  };
  Submit(*call, context, std::move(item));
  return call->reactor;
}

grpc::ServerUnaryReactor* InferenceService::ListModels(
    grpc::CallbackServerContext* context, const ::gatescope::v1::ListModelsRequest*,
    ::gatescope::v1::ListModelsResponse* response) {
  for (const auto& model : repository_->List()) {
    auto* m = response->add_models();
    m->set_name(model->name);
    m->set_version(model->version);
    m->set_ready(model->ready());
    m->set_task(model->config.task());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetModelMetadata(
    grpc::CallbackServerContext* context, const ::gatescope::v1::ModelMetadataRequest* request,
    ::gatescope::v1::ModelMetadataResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto found = repository_->Find(request->model_name(), request->model_version());
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(found.status()));
    return reactor;
  }
  const ServedModel& model = **found;
  response->set_name(model.name);
  response->set_version(model.version);
  response->set_ready(model.ready());
  *response->mutable_config() = model.config;
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gatescope
