#include "server/tasks/classification_task.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/explain/heatmap.h"
#include "server/postprocess/classification.h"
#include "server/tasks/classification_explain.h"
#include "server/tasks/v1_fields.h"

namespace gatescope {
namespace {

constexpr int kDefaultTopK = 5;

absl::StatusOr<int> TopKOf(int32_t requested) {
  if (requested < 0) return absl::InvalidArgumentError("top_k must be >= 0");
  return requested == 0 ? kDefaultTopK : requested;
}

// The top `k` classes of one example's "logits" into `response->classes`.
template <typename Response>
absl::Status FillClasses(const ModelConfig& config, const NamedTensors& outputs, int k,
                         Response* response) {
  auto logits = outputs.find("logits");
  if (logits == outputs.end()) return absl::InternalError("model returned no 'logits'");
  auto classes = TopKClasses(logits->second, config.labels(), k);
  if (!classes.ok()) return classes.status();
  for (const auto& c : *classes) {
    auto* out = response->add_classes();
    out->set_label(c.label);
    out->set_index(c.index);
    out->set_probability(c.probability);
  }
  return absl::OkStatus();
}

absl::Status CheckExplainRequest(const v1::ExplainRequest& request) {
  if (absl::Status st = RefuseDetectionFields(request); !st.ok()) return st;
  if (request.has_query_pixel()) {
    return absl::InvalidArgumentError("query_pixel applies to segmentation models only");
  }
  const bool is_image = request.input_case() == v1::ExplainRequest::kImage;
  if (request.heatmap_png() && !(is_image && request.rollout())) {
    return absl::InvalidArgumentError("heatmap_png needs an image input and rollout");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> ClassificationTask::Create(const ModelConfig& config,
                                                                 const TaskOptions& options) {
  ModelConfig normalised = config;
  if (absl::Status st = NormaliseImageInput(*normalised.mutable_input()); !st.ok()) return st;
  return std::unique_ptr<Task>(new ClassificationTask(std::move(normalised), options));
}

std::vector<std::string> ClassificationTask::Parameters() { return ExplainParameterNames(); }

absl::StatusOr<std::shared_ptr<TokenMapCollector>> ClassificationTask::StartExplanation(
    const ExplainOptions& options) const {
  auto collector =
      TokenMapCollector::Create(TokenLayoutOf(config()), options, this->options().explain_max_bytes);
  if (!collector.ok()) return collector.status();
  if (absl::Status st = (*collector)->CheckBudget(model_size()); !st.ok()) return st;
  return std::shared_ptr<TokenMapCollector>(*std::move(collector));
}

absl::StatusOr<std::unique_ptr<InferenceJob>> ClassificationTask::Predict(
    const v1::PredictRequest& request, v1::PredictResponse* response, CallDone done) const {
  auto make = V1ImageInput(request, config().input());
  if (!make.ok()) return make.status();
  auto k = TopKOf(request.top_k());
  if (!k.ok()) return k.status();
  if (absl::Status st = RefuseDetectionFields(request); !st.ok()) return st;
  auto write = [this, response, k = *k](const NamedTensors& outputs, ImageSize) {
    return FillClasses(config(), outputs, k, response);
  };
  return std::unique_ptr<InferenceJob>(
      std::make_unique<ImageJob>(*std::move(make), std::move(write), std::move(done)));
}

absl::StatusOr<std::unique_ptr<InferenceJob>> ClassificationTask::Explain(
    const v1::ExplainRequest& request, v1::ExplainResponse* response, CallDone done) const {
  auto make = V1ImageInput(request, config().input());
  if (!make.ok()) return make.status();
  if (absl::Status st = CheckExplainRequest(request); !st.ok()) return st;
  auto k = TopKOf(request.top_k());
  if (!k.ok()) return k.status();
  auto collector = StartExplanation(ExplainOptionsOf(request));
  if (!collector.ok()) return collector.status();
  auto write = [this, &request, response, k = *k, collector = *collector](
                   const NamedTensors& outputs, ImageSize) -> absl::Status {
    if (absl::Status st = FillClasses(config(), outputs, k, response); !st.ok()) return st;
    auto maps = collector->Finish();
    if (!maps.ok()) return maps.status();
    FillTokenMaps(*maps, response);
    if (!request.heatmap_png()) return absl::OkStatus();
    auto png = RenderOverlayPng(maps->rollout, request.image());
    if (!png.ok()) return png.status();
    response->set_rollout_png(*std::move(png));
    return absl::OkStatus();
  };
  return std::unique_ptr<InferenceJob>(std::make_unique<ImageJob>(
      *std::move(make), std::move(write), std::move(done), ImageJob::Explanation{*collector, {}}));
}

absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> ClassificationTask::Infer(
    const ::inference::ModelInferRequest& request,
    const std::shared_ptr<InferResults>& results) const {
  auto explain = ExplainParameters(request);
  if (!explain.ok()) return explain.status();
  const bool explaining = explain->has_value();
  auto known = [this, explaining](std::string_view name) {
    if (explaining) return name == "logits" || IsTokenMapOutput(std::string(name));
    return DeclaresOutput(config(), name);
  };
  // Every example's collector is checked against the cap before anything is queued.
  std::vector<std::shared_ptr<TokenMapCollector>> collectors;
  auto makers = KServeExamples(request, results, known);
  if (!makers.ok()) return makers.status();
  for (size_t i = 0; explaining && i < makers->size(); ++i) {
    auto collector = StartExplanation(**explain);
    if (!collector.ok()) return collector.status();
    collectors.push_back(*std::move(collector));
  }
  std::vector<std::unique_ptr<InferenceJob>> jobs;
  for (size_t i = 0; i < makers->size(); ++i) {
    if (!explaining) {
      jobs.push_back(KServeJob(std::move((*makers)[i]), i, results, nullptr));
      continue;
    }
    auto extend = [collector = collectors[i]](NamedTensors& outputs, ImageSize) -> absl::Status {
      auto maps = collector->Finish();
      if (!maps.ok()) return maps.status();
      for (auto& [name, t] : TokenMapTensors(*maps)) outputs.insert_or_assign(name, t);
      return absl::OkStatus();
    };
    jobs.push_back(KServeJob(std::move((*makers)[i]), i, results, std::move(extend),
                             ImageJob::Explanation{collectors[i], {}}));
  }
  return jobs;
}

KServeSignature ClassificationTask::Signature() const {
  KServeSignature s;
  s.input = InputTensor();
  s.format = ::inference::ModelInput::FORMAT_NCHW;
  for (const auto& name : config().outputs()) {
    s.outputs.push_back(Float32(name, name == "logits"
                                          ? std::vector<int64_t>{config().labels_size()}
                                          : std::vector<int64_t>{config().layers()}));
  }
  return s;
}

}  // namespace gatescope
