// Task "image_classification": forward() returns "logits" [B, classes] (and optional
// per-layer statistics [B, layers]); predictions are the top-k classes; explanations are
// the token maps of ViT-style models (rollout, gates, resonance, PLuG gates, per-layer
// attention), through gatescope.v1 Explain or KServe ModelInfer parameters (then each
// example returns "logits" and the explanation tensors, TokenMapTensors).
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/explain/heatmap.h"
#include "server/explain/token_maps.h"
#include "server/tasks/class_scores.h"
#include "server/tasks/classification_explain.h"
#include "server/tasks/image_tasks.h"
#include "server/tasks/task_registry.h"

namespace gatescope {
namespace {

// heatmap_png without what it needs.
absl::Status CheckExplainRequest(const v1::ExplainRequest& request) {
  const bool is_image = request.input_case() == v1::ExplainRequest::kImage;
  if (request.heatmap_png() && !(is_image && request.rollout())) {
    return absl::InvalidArgumentError("heatmap_png needs an image input and rollout");
  }
  return absl::OkStatus();
}

class ClassificationTask final : public ImageTask {
 public:
  ClassificationTask(ModelConfig config, TaskOptions options)
      : ImageTask(std::move(config), options) {}

  absl::StatusOr<JobPlan> PlanPrediction(const v1::PredictRequest& request,
                                         v1::PredictResponse* response) const override {
    auto k = TopKOf(request.top_k());
    if (!k.ok()) return k.status();
    return JobPlan{ImageJob::Writer([this, response, k = *k](const NamedTensors& outputs, ImageSize) {
      return FillClasses(config(), outputs, k, response);
    }), std::nullopt};
  }

  absl::StatusOr<JobPlan> PlanExplanation(const v1::ExplainRequest& request,
                                          v1::ExplainResponse* response) const override {
    if (absl::Status st = CheckExplainRequest(request); !st.ok()) return st;
    auto k = TopKOf(request.top_k());
    if (!k.ok()) return k.status();
    auto collector = Collector(ExplainOptionsOf(request));
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
    return JobPlan{std::move(write), ImageJob::Explanation{*collector, {}}};
  }

  absl::StatusOr<InferWork> PlanInfer(const ::inference::ModelInferRequest& request) const override {
    auto explain = ExplainParameters(request);
    if (!explain.ok()) return explain.status();
    InferWork work;
    if (!explain->has_value()) {
      work.known = [this](std::string_view name) { return DeclaresOutput(config(), name); };
      work.per_example = [] { return absl::StatusOr<ExampleWork>(ExampleWork{}); };
      return work;
    }
    work.known = [](std::string_view name) {
      return name == "logits" || IsTokenMapOutput(std::string(name));
    };
    work.per_example = [this, options = **explain]() -> absl::StatusOr<ExampleWork> {
      auto collector = Collector(options);
      if (!collector.ok()) return collector.status();
      auto add_maps = [collector = *collector](NamedTensors& outputs, ImageSize) -> absl::Status {
        auto maps = collector->Finish();
        if (!maps.ok()) return maps.status();
        for (auto& [name, t] : TokenMapTensors(*maps)) outputs.insert_or_assign(name, t);
        return absl::OkStatus();
      };
      return ExampleWork{std::move(add_maps), ImageJob::Explanation{*collector, {}}};
    };
    return work;
  }

  // "logits" [classes]; per-layer statistics [layers].
  std::vector<DeclaredTensor> DeclaredOutputs() const override {
    std::vector<DeclaredTensor> out;
    for (const auto& name : config().outputs()) {
      out.push_back(Float32(name, {name == "logits" ? config().labels_size() : config().layers()}));
    }
    return out;
  }

 private:
  // INVALID_ARGUMENT for options the model's maps cannot serve.
  absl::StatusOr<std::shared_ptr<TokenMapCollector>> Collector(const ExplainOptions& o) const {
    auto collector = TokenMapCollector::Create(TokenLayoutOf(config()), o, options().explain_max_bytes);
    if (!collector.ok()) return collector.status();
    return std::shared_ptr<TokenMapCollector>(*std::move(collector));
  }
};

absl::StatusOr<std::unique_ptr<Task>> Create(const ModelConfig& config, const TaskOptions& options,
                                             const ArchiveReader&) {
  auto normalised = ImageTask::WithImageInput(config);
  if (!normalised.ok()) return normalised.status();
  return std::unique_ptr<Task>(std::make_unique<ClassificationTask>(*std::move(normalised), options));
}

std::vector<std::string> V1Fields() {
  return {"rollout",          "rollout_options", "attention_layers", "attention_heads",
          "attention_queries", "resonance",      "heatmap_png",      "gates",
          "plug_gates"};
}

}  // namespace

extern const TaskEntry kClassificationTask{"image_classification", Create, ExplainParameterNames,
                                           V1Fields};

}  // namespace gatescope
