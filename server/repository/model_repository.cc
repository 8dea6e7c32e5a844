#include "server/repository/model_repository.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/clock.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"
#include "server/config/model_config.h"
#include "server/repository/repository_names.h"
#include "server/tasks/task_registry.h"

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

}  // namespace

bool ModelRepository::VersionLess::operator()(const std::string& a, const std::string& b) const {
  // Numeric names first, by value, then the rest by text; ties broken by text so "01" and
  // "1" stay distinct. A strict weak order, as std::map needs.
  int64_t x = 0, y = 0;
  const bool an = absl::SimpleAtoi(a, &x), bn = absl::SimpleAtoi(b, &y);
  return std::make_tuple(!an, x, a) < std::make_tuple(!bn, y, b);
}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Load(
    const RepositoryOptions& options, RepositoryDeps deps) {
  if (deps.loader == nullptr || deps.metrics == nullptr || !deps.schedulers ||
      deps.clock == nullptr) {
    return absl::InvalidArgumentError("ModelRepository needs a loader, metrics, schedulers, clock");
  }
  std::error_code ec;
  if (!fs::is_directory(options.root, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository not found: ", options.root));
  }
  std::unique_ptr<ModelRepository> repo(new ModelRepository(options, std::move(deps)));
  for (const std::string& name : repo->ModelDirectories()) {
    repo->LoadModel(name).IgnoreError();  // a failed model stays listed as not ready
  }
  return repo;
}

ModelRepository::ModelRepository(RepositoryOptions options, RepositoryDeps deps)
    : options_(std::move(options)), deps_(std::move(deps)) {}

absl::Status ModelRepository::InitModel(ServedModel& model, const std::string& path) const {
  const fs::path model_dir = fs::path(options_.root) / model.name;
  GS_ASSIGN_OR_RETURN(const v1::ServingConfig overrides, ReadServingConfig(model_dir));
  GS_ASSIGN_OR_RETURN(const std::string json, deps_.loader->ReadMetadata(path));
  GS_ASSIGN_OR_RETURN(model.config, ParseModelConfig(json));
  GS_ASSIGN_OR_RETURN(model.task, CreateTask(model.config, options_.tasks));
  model.config = model.task->config();
  for (const std::string& ops : model.config.required_ops()) {
    GS_RETURN_IF_ERROR(deps_.loader->CheckOps(ops));
  }
  GS_ASSIGN_OR_RETURN(model.plan, MakeServingPlan(options_.defaults, model.config.max_batch_size(),
                                                  overrides, deps_.loader->Devices()));
  return InitInstances(model, path);
}

absl::Status ModelRepository::InitInstances(ServedModel& model, const std::string& path) const {
  model.observer = std::make_unique<MetricsObserver>(model.metrics);
  model.metrics->queue_capacity->Set(QueueCapacity(model.plan.batching));
  std::vector<Executor*> executors;
  for (const InstanceSpec& spec : model.plan.instances) {
    auto runner = deps_.loader->Load(path, spec);
    if (!runner.ok()) {
      return absl::Status(runner.status().code(),
                          absl::StrCat("instance ", spec.name, " on ", DeviceName(spec), ": ",
                                       runner.status().message()));
    }
    model.instances.push_back(std::make_unique<ModelInstance>(
        *std::move(runner), model.task.get(), deps_.clock, model.observer.get()));
    executors.push_back(model.instances.back().get());
  }
  GS_ASSIGN_OR_RETURN(model.scheduler,
                      deps_.schedulers(std::move(executors), model.plan.batching,
                                       model.observer.get()));
  return absl::OkStatus();
}

ModelRepository::~ModelRepository() { StopAll(); }

std::vector<std::string> ModelRepository::ModelDirectories() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.root, ec)) {
    // Directories that cannot name a model (".git", "a b") are not models; polling
    // would repeat a warning every interval, so they are skipped silently.
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && ValidateModelName(name).ok()) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ModelRepository::Fingerprint(const std::string& name) const {
  // Versions and modification times of every file the model's loading reads.
  std::string print;
  std::error_code ec;
  const fs::path dir = fs::path(options_.root) / name;
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
    const auto fname = entry.path().filename();
    if (fname == kModelFile || fname == kServingConfigFile) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const auto t = fs::last_write_time(f, ec).time_since_epoch().count();
    print += absl::StrCat(f.string(), "@", t, ";");
  }
  return print;
}

absl::Status ModelRepository::LoadModel(const std::string& name) {
  absl::MutexLock control(&control_mu_);
  return LoadModelLocked(name);
}

absl::Status ModelRepository::LoadModelLocked(const std::string& name) {
  if (stopped_.load()) return absl::UnavailableError("server is shutting down");
  GS_RETURN_IF_ERROR(ValidateModelName(name));
  const fs::path model_dir = fs::path(options_.root) / name;
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("no model ", QuoteName(name), " in the repository"));
  }
  const std::string print = Fingerprint(name);
  Versions versions;
  absl::Status first_error = absl::NotFoundError(
      absl::StrCat("model '", name, "' has no <version>/", kModelFile));
  bool any_ready = false;
  for (const auto& version_dir : fs::directory_iterator(model_dir, ec)) {
    const fs::path file = version_dir.path() / kModelFile;
    if (!version_dir.is_directory() || !fs::exists(file)) continue;
    if (!IsVersionName(version_dir.path().filename().string())) {
      GS_LOG(WARNING) << "ignoring " << name << "/" << version_dir.path().filename().string()
                      << ": a version directory is named by a positive integer";
      continue;
    }
    auto model = std::make_shared<ServedModel>();
    model->name = name;
    model->version = version_dir.path().filename().string();
    model->metrics = deps_.metrics->ForModel(name);
    model->load_status = InitModel(*model, file.string());
    if (model->load_status.ok() && model->config.name() != model->name) {
      GS_LOG(WARNING) << "model " << model->name << " declares name '" << model->config.name()
                      << "'; serving it as " << model->name;
    }
    if (model->ready()) {
      any_ready = true;
      GS_LOG(INFO) << "loaded " << model->name << " version " << model->version;
    } else {
      if (first_error.code() == absl::StatusCode::kNotFound) first_error = model->load_status;
      GS_LOG(ERROR) << "failed to load " << file.string() << ": " << model->load_status;
    }
    versions[model->version] = std::move(model);
  }
  Versions old;
  bool kept_old = false;
  {
    absl::MutexLock lock(&mu_);
    auto& slot = models_[name];
    bool old_ready = false;
    for (const auto& [v, m] : slot) old_ready |= m->ready();
    fingerprints_[name] = print;
    // A failed reload (e.g. a half-written file) keeps the versions that serve now.
    kept_old = !any_ready && old_ready;
    if (!kept_old) {
      old.swap(slot);
      slot = versions;
    }
  }
  if (kept_old) {
    StopVersions(versions);
    GS_LOG(ERROR) << "reload of " << name << " failed; still serving the loaded versions";
    return first_error;
  }
  deps_.metrics->ForModel(name)->ready->Set(any_ready ? 1 : 0);
  NotifyState(name);
  StopVersions(old);  // drains requests already queued on the replaced versions
  return any_ready ? absl::OkStatus() : first_error;
}

absl::Status ModelRepository::UnloadModel(const std::string& name) {
  absl::MutexLock control(&control_mu_);
  return UnloadModelLocked(name);
}

absl::Status ModelRepository::UnloadModelLocked(const std::string& name) {
  if (stopped_.load()) return absl::UnavailableError("server is shutting down");
  Versions old;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown model ", QuoteName(name)));
    }
    old.swap(it->second);
    models_.erase(it);
    fingerprints_.erase(name);
  }
  deps_.metrics->ForModel(name)->ready->Set(0);
  NotifyState(name);
  StopVersions(old);
  GS_LOG(INFO) << "unloaded " << name;
  return absl::OkStatus();
}

void ModelRepository::Poll() {
  absl::MutexLock control(&control_mu_);
  if (stopped_.load()) return;
  const std::vector<std::string> present = ModelDirectories();
  std::vector<std::string> gone, changed;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, versions] : models_) {
      if (!std::binary_search(present.begin(), present.end(), name)) gone.push_back(name);
    }
  }
  for (const auto& name : present) {
    const std::string print = Fingerprint(name);
    absl::MutexLock lock(&mu_);
    auto it = fingerprints_.find(name);
    if (it == fingerprints_.end() || it->second != print) changed.push_back(name);
  }
  for (const auto& name : gone) UnloadModelLocked(name).IgnoreError();
  for (const auto& name : changed) LoadModelLocked(name).IgnoreError();
}

void ModelRepository::SetStateListener(StateListener listener) {
  absl::MutexLock lock(&mu_);
  listener_ = std::move(listener);
}

void ModelRepository::NotifyState(const std::string& name) {
  StateListener listener;
  {
    absl::MutexLock lock(&mu_);
    listener = listener_;
  }
  if (!listener) return;
  auto current = Find(name, "");
  listener(name, current.ok() && (*current)->ready());
}

void ModelRepository::StopVersions(const Versions& versions) {
  for (const auto& [version, model] : versions) {
    if (model->scheduler) model->scheduler->Stop();
  }
}

absl::StatusOr<std::shared_ptr<ServedModel>> ModelRepository::Find(
    const std::string& name, const std::string& version) const {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.empty()) {
    return absl::NotFoundError(absl::StrCat("unknown model ", QuoteName(name)));
  }
  if (version.empty()) {
    // The highest version that loaded; the highest of all if none did.
    for (auto v = it->second.rbegin(); v != it->second.rend(); ++v) {
      if (v->second->ready()) return v->second;
    }
    return it->second.rbegin()->second;
  }
  auto v = it->second.find(version);
  if (v == it->second.end()) {
    return absl::NotFoundError(
        absl::StrCat("model ", QuoteName(name), " has no version ", QuoteName(version)));
  }
  return v->second;
}

std::vector<std::shared_ptr<ServedModel>> ModelRepository::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& [name, versions] : models_) {
    for (const auto& [version, model] : versions) out.push_back(model);
  }
  return out;
}

void ModelRepository::StopAll() {
  stopped_.store(true);  // loads, unloads and polls now refuse
  for (const auto& model : List()) {
    if (model->scheduler) model->scheduler->Stop();
    model->metrics->ready->Set(0);
  }
}

}  // namespace gatescope
