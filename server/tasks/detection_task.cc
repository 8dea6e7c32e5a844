#include "server/tasks/detection_task.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/api/tensor_proto.h"
#include "server/explain/detection_maps.h"
#include "server/tasks/v1_fields.h"

namespace gatescope {
namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("model config: ", what));
}

absl::Status ValidateDetection(const ModelConfig& config) {
  const v1::DetectionConfig& d = config.detection();
  if (!config.has_detection() || d.encoder_layers() < 0 || d.decoder_layers() < 1 ||
      d.levels() < 1 || d.points() < 1 || d.queries() < 1 || d.max_detections() < 1) {
    return Invalid(
        "object_detection needs detection {encoder_layers >= 0, decoder_layers, levels, "
        "points, queries, max_detections >= 1}");
  }
  if (!(d.score_threshold() >= 0.f && d.score_threshold() < 1.f)) {
    return Invalid("detection.score_threshold must be in [0, 1)");
  }
  if (config.layers() != d.encoder_layers() + d.decoder_layers() || config.heads() < 1) {
    return Invalid("object_detection: layers must be encoder_layers + decoder_layers, heads >= 1");
  }
  if (!config.input().any_size() || !config.input().native_size()) {
    return Invalid("object_detection needs input.any_size and input.native_size");
  }
  if (!DeclaresOutput(config, "boxes")) return Invalid("object_detection outputs must include 'boxes'");
  for (const auto& kind : config.maps()) {
    if (kind != "sampling_points" && kind != "plug_gate") {
      return Invalid(absl::StrCat(
          "object_detection maps are 'sampling_points' and 'plug_gate', not '", kind, "'"));
    }
  }
  const bool strides_ok = d.level_strides_size() == d.levels() &&
                          std::all_of(d.level_strides().begin(), d.level_strides().end(),
                                      [](int32_t s) { return s >= 1; });
  if (DeclaresMap(config, "plug_gate") && !strides_ok) {
    return Invalid("object_detection with plug_gate maps needs detection.level_strides "
                   "(one stride >= 1 per level)");
  }
  return absl::OkStatus();
}

absl::Status CheckExplainRequest(const v1::ExplainRequest& r) {
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

template <typename Request>
absl::StatusOr<DetectionOptions> OptionsOf(const ModelConfig& config, const Request& request) {
  return ResolveDetectionOptions(config.detection(),
                                 request.has_score_threshold()
                                     ? std::optional<float>(request.score_threshold())
                                     : std::nullopt,
                                 request.max_detections());
}

absl::StatusOr<DetectionOptions> OptionsOf(const ModelConfig& config,
                                           const ::inference::ModelInferRequest& request) {
  const auto& params = request.parameters();
  std::optional<float> threshold;
  int64_t max_detections = 0;
  if (auto it = params.find("score_threshold"); it != params.end()) {
    if (it->second.parameter_choice_case() != ::inference::InferParameter::kDoubleParam) {
      return absl::InvalidArgumentError("score_threshold parameter must be a double_param");
    }
    threshold = static_cast<float>(it->second.double_param());
  }
  if (auto it = params.find("max_detections"); it != params.end()) {
    if (it->second.parameter_choice_case() != ::inference::InferParameter::kInt64Param) {
      return absl::InvalidArgumentError("max_detections parameter must be an int64_param");
    }
    max_detections = it->second.int64_param();
  }
  return ResolveDetectionOptions(config.detection(), threshold, max_detections);
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
  layout.has_sampling_points = DeclaresMap(config, "sampling_points");
  layout.has_plug_gate = DeclaresMap(config, "plug_gate");
  layout.level_strides.assign(d.level_strides().begin(), d.level_strides().end());
  layout.canvas = {config.input().shape(1), config.input().shape(2)};
  return layout;
}

void FillMaps(const DetectionExplanation& ex, v1::ExplainResponse* response) {
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

// The detections as KServe's padded [K, ...] outputs, added to `outputs`.
void AddDetectionOutputs(const std::vector<Detection>& dets, int64_t k, NamedTensors& outputs) {
  at::Tensor xyxy = at::zeros({k, 4}, at::kFloat);
  at::Tensor scores = at::zeros({k}, at::kFloat);
  at::Tensor classes = at::full({k}, -1, at::kLong);
  auto b = xyxy.accessor<float, 2>();
  auto s = scores.accessor<float, 1>();
  auto c = classes.accessor<int64_t, 1>();
  for (size_t i = 0; i < dets.size() && static_cast<int64_t>(i) < k; ++i) {
    const Detection& d = dets[i];
    b[i][0] = d.x1;
    b[i][1] = d.y1;
    b[i][2] = d.x2;
    b[i][3] = d.y2;
    s[i] = d.score;
    c[i] = d.label;
  }
  outputs.insert_or_assign(DetectionTask::kBoxes, xyxy);
  outputs.insert_or_assign(DetectionTask::kScores, scores);
  outputs.insert_or_assign(DetectionTask::kClasses, classes);
  outputs.insert_or_assign(DetectionTask::kCount,
                           at::scalar_tensor(static_cast<int64_t>(dets.size()), at::kLong));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> DetectionTask::Create(const ModelConfig& config,
                                                            const TaskOptions& options) {
  ModelConfig normalised = config;
  if (absl::Status st = NormaliseImageInput(*normalised.mutable_input()); !st.ok()) return st;
  if (absl::Status st = ValidateDetection(normalised); !st.ok()) return st;
  return std::unique_ptr<Task>(new DetectionTask(std::move(normalised), options));
}

absl::StatusOr<std::vector<Detection>> DetectionTask::Decode(
    const NamedTensors& outputs, ImageSize size, const DetectionOptions& options) const {
  auto logits = outputs.find("logits");
  auto boxes = outputs.find("boxes");
  if (logits == outputs.end() || boxes == outputs.end()) {
    return absl::InternalError("detection model returned no 'logits' or no 'boxes'");
  }
  const int64_t queries = config().detection().queries();
  if (logits->second.dim() != 2 || logits->second.size(0) != queries ||
      logits->second.size(1) != config().labels_size()) {
    return absl::InternalError(absl::StrCat("detection logits must be [", queries, ", ",
                                            config().labels_size(), "] as the metadata says"));
  }
  return DecodeDetections(logits->second, boxes->second, size.height, size.width, options);
}

void DetectionTask::Fill(const std::vector<Detection>& detections,
                         google::protobuf::RepeatedPtrField<v1::Detection>* out) const {
  for (const Detection& d : detections) {
    v1::Detection* p = out->Add();
    p->set_x1(d.x1);
    p->set_y1(d.y1);
    p->set_x2(d.x2);
    p->set_y2(d.y2);
    p->set_score(d.score);
    p->set_label_index(static_cast<int32_t>(d.label));
    p->set_label(config().labels(static_cast<int>(d.label)));
    p->set_query(static_cast<int32_t>(d.query));
  }
}

absl::StatusOr<std::unique_ptr<InferenceJob>> DetectionTask::Predict(
    const v1::PredictRequest& request, v1::PredictResponse* response, CallDone done) const {
  auto make = V1ImageInput(request, config().input());
  if (!make.ok()) return make.status();
  if (request.top_k() < 0) return absl::InvalidArgumentError("top_k must be >= 0");
  auto options = OptionsOf(config(), request);
  if (!options.ok()) return options.status();
  auto write = [this, response, options = *options](const NamedTensors& outputs,
                                                    ImageSize size) -> absl::Status {
    auto detections = Decode(outputs, size, options);
    if (!detections.ok()) return detections.status();
    Fill(*detections, response->mutable_detections());
    return absl::OkStatus();
  };
  return std::unique_ptr<InferenceJob>(
      std::make_unique<ImageJob>(*std::move(make), std::move(write), std::move(done)));
}

absl::StatusOr<std::unique_ptr<InferenceJob>> DetectionTask::Explain(
    const v1::ExplainRequest& request, v1::ExplainResponse* response, CallDone done) const {
  auto make = V1ImageInput(request, config().input());
  if (!make.ok()) return make.status();
  if (absl::Status st = CheckExplainRequest(request); !st.ok()) return st;
  auto options = OptionsOf(config(), request);
  if (!options.ok()) return options.status();
  DetectionMapOptions map_options{request.plug_gates(), options->max_detections};
  auto created = DetectionMapCollector::Create(LayoutOf(config()), map_options,
                                               this->options().explain_max_bytes);
  if (!created.ok()) return created.status();
  std::shared_ptr<DetectionMapCollector> collector = *std::move(created);
  // The smallest input (the canvas) first; the input's own size before the pass.
  if (absl::Status st = collector->CheckBudget(model_size()); !st.ok()) return st;
  auto write = [this, response, collector, options = *options](
                   const NamedTensors& outputs, ImageSize size) -> absl::Status {
    auto detections = Decode(outputs, size, options);
    if (!detections.ok()) return detections.status();
    auto ex = collector->Finish(*detections, size.height, size.width);
    if (!ex.ok()) return ex.status();
    Fill(*detections, response->mutable_detections());
    FillMaps(*ex, response);
    return absl::OkStatus();
  };
  return std::unique_ptr<InferenceJob>(std::make_unique<ImageJob>(
      *std::move(make), std::move(write), std::move(done),
      ImageJob::Explanation{std::move(collector), {}}));
}

absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> DetectionTask::Infer(
    const ::inference::ModelInferRequest& request,
    const std::shared_ptr<InferResults>& results) const {
  auto options = OptionsOf(config(), request);
  if (!options.ok()) return options.status();
  auto known = [this](std::string_view name) {
    return DeclaresOutput(config(), name) || name == kBoxes || name == kScores ||
           name == kClasses || name == kCount;
  };
  auto makers = KServeExamples(request, results, known);
  if (!makers.ok()) return makers.status();
  const int64_t k = std::min<int64_t>(
      options->max_detections, int64_t{config().detection().queries()} * config().labels_size());
  auto add = [this, options = *options, k](NamedTensors& outputs, ImageSize size) -> absl::Status {
    auto detections = Decode(outputs, size, options);
    if (!detections.ok()) return detections.status();
    AddDetectionOutputs(*detections, k, outputs);
    return absl::OkStatus();
  };
  std::vector<std::unique_ptr<InferenceJob>> jobs;
  for (size_t i = 0; i < makers->size(); ++i) {
    jobs.push_back(KServeJob(std::move((*makers)[i]), i, results, add));
  }
  return jobs;
}

KServeSignature DetectionTask::Signature() const {
  const int64_t q = config().detection().queries();
  KServeSignature s;
  s.input = InputTensor();
  s.format = ::inference::ModelInput::FORMAT_NCHW;
  for (const auto& name : config().outputs()) {
    s.outputs.push_back(Float32(name, name == "boxes"    ? std::vector<int64_t>{q, 4}
                                      : name == "logits" ? std::vector<int64_t>{q, config().labels_size()}
                                                         : std::vector<int64_t>{config().layers()}));
  }
  s.outputs.push_back({kBoxes, "FP32", ::inference::TYPE_FP32, {-1, 4}});
  s.outputs.push_back({kScores, "FP32", ::inference::TYPE_FP32, {-1}});
  s.outputs.push_back({kClasses, "INT64", ::inference::TYPE_INT64, {-1}});
  s.outputs.push_back({kCount, "INT64", ::inference::TYPE_INT64, {}});
  return s;
}

}  // namespace gatescope
