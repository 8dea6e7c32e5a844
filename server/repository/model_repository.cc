#include "server/repository/model_repository.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <ATen/core/Tensor.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/clock.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"

namespace gatescope {
namespace fs = std::filesystem;

namespace {

constexpr char kModelFile[] = "model.pt";
constexpr char kServingConfigFile[] = "config.pbtxt";

absl::StatusOr<v1::ServingConfig> ReadServingConfig(const fs::path& model_dir) {
  const fs::path path = model_dir / kServingConfigFile;
  if (!fs::exists(path)) return v1::ServingConfig();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseServingConfig(text.str());
}

absl::Status InitModel(ServedModel& model, const fs::path& model_dir, const std::string& path,
                       const RunnerLoader& loader, const ServingDefaults& defaults) {
  GS_ASSIGN_OR_RETURN(const v1::ServingConfig overrides, ReadServingConfig(model_dir));
  GS_ASSIGN_OR_RETURN(LoadedRunner first, loader(path));
  if (first.metadata_json.empty()) {
    return absl::InvalidArgumentError("model.pt has no gatescope.json metadata");
  }
  GS_ASSIGN_OR_RETURN(model.config, ParseModelConfig(first.metadata_json));
  GS_ASSIGN_OR_RETURN(model.plan,
                      MakeServingPlan(defaults, model.config.max_batch_size(), overrides));
  model.instances.push_back(std::move(first.runner));
  while (static_cast<int>(model.instances.size()) < model.plan.instances) {
    GS_ASSIGN_OR_RETURN(LoadedRunner more, loader(path));
    model.instances.push_back(std::move(more.runner));
  }
  std::vector<ModelRunner*> runners;
  for (auto& r : model.instances) runners.push_back(r.get());
  model.observer = std::make_unique<MetricsObserver>(model.metrics);
  GS_ASSIGN_OR_RETURN(model.scheduler,
                      DynamicBatcher::Create(runners, model.plan.batching, RealClock::Get(),
                                             model.observer.get()));
  return absl::OkStatus();
}

}  // namespace

ServedModel::~ServedModel() {
  if (scheduler) scheduler->Stop();
}

bool ModelRepository::VersionLess::operator()(const std::string& a, const std::string& b) const {
  // Numeric names first, by value, then the rest by text; ties broken by text so "01" and
  // "1" stay distinct. A strict weak order, as std::map needs.
  int64_t x = 0, y = 0;
  const bool an = absl::SimpleAtoi(a, &x), bn = absl::SimpleAtoi(b, &y);
  return std::make_tuple(!an, x, a) < std::make_tuple(!bn, y, b);
}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Load(
    const RepositoryOptions& options, const RunnerLoader& loader, ServerMetrics* metrics) {
  std::error_code ec;
  if (!fs::is_directory(options.root, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository not found: ", options.root));
  }
  std::unique_ptr<ModelRepository> repo(new ModelRepository());
  std::vector<fs::path> model_dirs;
  for (const auto& entry : fs::directory_iterator(options.root)) {
    if (entry.is_directory()) model_dirs.push_back(entry.path());
  }
  std::sort(model_dirs.begin(), model_dirs.end());
  for (const fs::path& model_dir : model_dirs) {
    for (const auto& version_dir : fs::directory_iterator(model_dir)) {
      const fs::path file = version_dir.path() / kModelFile;
      if (!version_dir.is_directory() || !fs::exists(file)) continue;
      auto model = std::make_shared<ServedModel>();
      model->name = model_dir.filename().string();
      model->version = version_dir.path().filename().string();
      model->metrics = metrics->ForModel(model->name);
      model->load_status =
          InitModel(*model, model_dir, file.string(), loader, options.defaults);
      if (model->load_status.ok() && model->config.name() != model->name) {
        GS_LOG(WARNING) << "model " << model->name << " declares name '"
                        << model->config.name() << "'; serving it as " << model->name;
      }
      model->metrics->ready->Set(model->ready() ? 1 : 0);
      if (model->ready()) {
        GS_LOG(INFO) << "loaded " << model->name << " version " << model->version;
      } else {
        GS_LOG(ERROR) << "failed to load " << file.string() << ": " << model->load_status;
      }
      repo->models_[model->name][model->version] = std::move(model);
    }
  }
  return repo;
}

ModelRepository::~ModelRepository() { StopAll(); }

absl::StatusOr<std::shared_ptr<ServedModel>> ModelRepository::Find(
    const std::string& name, const std::string& version) const {
  auto it = models_.find(name);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  if (version.empty()) {
    // The highest version that loaded; the highest of all if none did.
    for (auto v = it->second.rbegin(); v != it->second.rend(); ++v) {
      if (v->second->ready()) return v->second;
    }
    return it->second.rbegin()->second;
  }
  auto v = it->second.find(version);
  if (v == it->second.end()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no version '", version, "'"));
  }
  return v->second;
}

std::vector<std::shared_ptr<ServedModel>> ModelRepository::List() const {
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& [name, versions] : models_) {
    for (const auto& [version, model] : versions) out.push_back(model);
  }
  return out;
}

void ModelRepository::StopAll() {
  for (const auto& model : List()) {
    if (model->scheduler) model->scheduler->Stop();
    model->metrics->ready->Set(0);
  }
}

}  // namespace gatescope
