// Task "object_detection": forward() returns "logits" [B, Q, classes] and "boxes"
// [B, Q, 4]; predictions are the public Deformable-DETR top-k-then-threshold decoding in
// the input's pixels (score_threshold, max_detections). Explanations are each detection's
// decoder sampling points, attention weights and PLuG gates, and the encoder's PLuG gate
// maps (gatescope.v1 Explain only). KServe takes the parameters "score_threshold"
// (double_param) and "max_detections" (int64_param) and adds the TensorFlow Object
// Detection API's outputs, K = max_detections (capped at queries * classes), rows past
// num_detections padded with zero boxes and scores and class -1: detection_boxes FP32
// [B, K, 4] (x1, y1, x2, y2 input pixels), detection_scores FP32 [B, K],
// detection_classes INT64 [B, K] (label indices), num_detections INT64 [B].
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/api/tensor_proto.h"
#include "server/explain/detection_maps.h"
#include "server/postprocess/detection.h"
#include "server/tasks/image_tasks.h"
#include "server/tasks/task_registry.h"

namespace gatescope {
namespace {

constexpr char kBoxes[] = "detection_boxes";
constexpr char kScores[] = "detection_scores";
constexpr char kClasses[] = "detection_classes";
constexpr char kCount[] = "num_detections";

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
  outputs.insert_or_assign(kBoxes, xyxy);
  outputs.insert_or_assign(kScores, scores);
  outputs.insert_or_assign(kClasses, classes);
  outputs.insert_or_assign(kCount,
                           at::scalar_tensor(static_cast<int64_t>(dets.size()), at::kLong));
}

class DetectionTask final : public ImageTask {
 public:
  DetectionTask(ModelConfig config, TaskOptions options) : ImageTask(std::move(config), options) {}

  absl::StatusOr<JobPlan> PlanPrediction(const v1::PredictRequest& request,
                                         v1::PredictResponse* response) const override {
    if (request.top_k() < 0) return absl::InvalidArgumentError("top_k must be >= 0");
    auto options = OptionsOf(config(), request);
    if (!options.ok()) return options.status();
    return JobPlan{ImageJob::Writer([this, response, options = *options](const NamedTensors& outputs,
                                                                 ImageSize size) -> absl::Status {
      auto detections = Decode(outputs, size, options);
      if (!detections.ok()) return detections.status();
      Fill(*detections, response->mutable_detections());
      return absl::OkStatus();
    }), std::nullopt};
  }

  // Takes plug_gates, score_threshold and max_detections; the sampling points of every
  // detection are always returned.
  absl::StatusOr<JobPlan> PlanExplanation(const v1::ExplainRequest& request,
                                          v1::ExplainResponse* response) const override {
    auto options = OptionsOf(config(), request);
    if (!options.ok()) return options.status();
    DetectionMapOptions map_options{request.plug_gates(), options->max_detections};
    auto created = DetectionMapCollector::Create(LayoutOf(config()), map_options,
                                                 this->options().explain_max_bytes);
    if (!created.ok()) return created.status();
    std::shared_ptr<DetectionMapCollector> collector = *std::move(created);
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
    return JobPlan{std::move(write), ImageJob::Explanation{std::move(collector), {}}};
  }

  absl::StatusOr<InferWork> PlanInfer(const ::inference::ModelInferRequest& request) const override {
    auto options = OptionsOf(config(), request);
    if (!options.ok()) return options.status();
    const int64_t k = std::min<int64_t>(
        options->max_detections, int64_t{config().detection().queries()} * config().labels_size());
    InferWork work;
    work.known = [this](std::string_view name) {
      return DeclaresOutput(config(), name) || name == kBoxes || name == kScores ||
             name == kClasses || name == kCount;
    };
    work.per_example = [this, options = *options, k]() -> absl::StatusOr<ExampleWork> {
      ExampleWork one;
      one.extend = [this, options, k](NamedTensors& outputs, ImageSize size) -> absl::Status {
        auto detections = Decode(outputs, size, options);
        if (!detections.ok()) return detections.status();
        AddDetectionOutputs(*detections, k, outputs);
        return absl::OkStatus();
      };
      return one;
    };
    return work;
  }

  // "logits" [Q, classes], "boxes" [Q, 4], then the four detection outputs.
  std::vector<DeclaredTensor> DeclaredOutputs() const override {
    const int64_t q = config().detection().queries();
    std::vector<DeclaredTensor> out;
    for (const auto& name : config().outputs()) {
      std::vector<int64_t> shape{config().layers()};
      if (name == "boxes") shape = {q, 4};
      if (name == "logits") shape = {q, config().labels_size()};
      out.push_back(Float32(name, std::move(shape)));
    }
    out.push_back({kBoxes, "FP32", ::inference::TYPE_FP32, {-1, 4}});
    out.push_back({kScores, "FP32", ::inference::TYPE_FP32, {-1}});
    out.push_back({kClasses, "INT64", ::inference::TYPE_INT64, {-1}});
    out.push_back({kCount, "INT64", ::inference::TYPE_INT64, {}});
    return out;
  }

 private:
  // One example's detections for an input of `size`; INTERNAL for missing outputs or
  // shapes other than the metadata declares.
  absl::StatusOr<std::vector<Detection>> Decode(const NamedTensors& outputs, ImageSize size,
                                                const DetectionOptions& options) const {
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

  // The detections into a gatescope.v1 response, labels named.
  void Fill(const std::vector<Detection>& detections,
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
};

// Also INVALID_ARGUMENT unless the metadata describes a detector: outputs "logits" and
// "boxes", a complete `detection` message (level_strides for PLuG models), any_size with
// native_size, maps among "sampling_points" and "plug_gate", layers = encoder + decoder.
absl::StatusOr<std::unique_ptr<Task>> Create(const ModelConfig& config, const TaskOptions& options,
                                             const ArchiveReader&) {
  auto normalised = ImageTask::WithImageInput(config);
  if (!normalised.ok()) return normalised.status();
  if (absl::Status st = ValidateDetection(*normalised); !st.ok()) return st;
  return std::unique_ptr<Task>(std::make_unique<DetectionTask>(*std::move(normalised), options));
}

std::vector<std::string> Parameters() { return {"score_threshold", "max_detections"}; }

std::vector<std::string> V1Fields() { return {"plug_gates", "score_threshold", "max_detections"}; }

}  // namespace

extern const TaskEntry kDetectionTask{"object_detection", Create, Parameters, V1Fields};

}  // namespace gatescope
