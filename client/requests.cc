#include "client/requests.h"

namespace gatescope::client {
namespace {

template <typename Request>
void SetDetectionFlags(const DetectionFlags& flags, Request& request) {
  if (flags.score_threshold) request.set_score_threshold(*flags.score_threshold);
  if (flags.max_detections) request.set_max_detections(flags.max_detections);
}

}  // namespace

v1::PredictRequest PredictRequestFor(const PredictOptions& options, std::string bytes) {
  v1::PredictRequest request;
  request.set_model_name(options.target.model);
  request.set_model_version(options.target.version);
  request.set_top_k(options.top_k);
  // Segmentation models only (the others ignore them).
  request.set_mask_png(!options.out_dir.empty());
  request.set_class_probabilities(!options.out_dir.empty() && options.probabilities);
  SetDetectionFlags(options.detection, request);
  if (options.raw_shape.empty()) {
    request.set_image(std::move(bytes));
    return request;
  }
  v1::Tensor* t = request.mutable_tensor();
  t->set_dtype(options.raw_dtype == "float32" ? v1::Tensor::FLOAT32 : v1::Tensor::UINT8);
  for (int64_t dim : options.raw_shape) t->add_shape(dim);
  t->set_data(std::move(bytes));
  return request;
}

v1::PredictRequest PredictRequestFor(const PredictOptions& options, const InputImage& input) {
  if (!input.text) return PredictRequestFor(options, input.bytes);
  v1::PredictRequest request;
  request.set_model_name(options.target.model);
  request.set_model_version(options.target.version);
  request.set_top_k(options.top_k);
  request.set_text(input.bytes);
  return request;
}

v1::ExplainRequest RolloutRequestFor(const ExplainOptions& options, const std::string& model,
                                     std::string image) {
  v1::ExplainRequest request;
  request.set_model_name(model);
  request.set_model_version(options.target.version);
  v1::RolloutOptions* ro = request.mutable_rollout_options();
  ro->set_head_fusion(options.rollout_flags.head_fusion);
  ro->set_signed_maps(options.rollout_flags.signed_maps);
  ro->set_discard_ratio(options.rollout_flags.discard_ratio);
  ro->set_start_layer(options.rollout_flags.start_layer);
  request.set_image(std::move(image));
  return request;
}

v1::ExplainRequest ExplainRequestFor(const ExplainOptions& options, std::string image) {
  v1::ExplainRequest request = RolloutRequestFor(options, options.target.model, std::move(image));
  request.set_rollout(options.rollout);
  request.set_gates(options.gates);
  request.set_resonance(options.resonance);
  request.set_plug_gates(options.plug_gates);
  request.set_heatmap_png(options.rollout);
  for (int l : options.layers) request.add_attention_layers(l);
  for (int h : options.heads) request.add_attention_heads(h);
  for (int q : options.queries) request.add_attention_queries(q);
  if (options.query) {
    request.mutable_query_pixel()->set_y(options.query->y);
    request.mutable_query_pixel()->set_x(options.query->x);
  }
  SetDetectionFlags(options.detection, request);
  return request;
}

void SetText(std::string text, v1::ExplainRequest& request) {
  request.set_text(std::move(text));
  request.set_heatmap_png(false);
}

v1::ExplainRequest ExplainRequestFor(const ExplainOptions& options, const InputImage& input) {
  if (!input.text) return ExplainRequestFor(options, input.bytes);
  v1::ExplainRequest request = ExplainRequestFor(options, std::string());
  SetText(input.bytes, request);
  return request;
}

}  // namespace gatescope::client
