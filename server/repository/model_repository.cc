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
#include "server/common/thread_scheduling.h"
#include "server/config/model_config.h"
#include "server/repository/monitoring_reference.h"
#include "server/repository/repository_names.h"
#include "server/runtime/cuda_graph_policy.h"
#include "server/tasks/task_registry.h"

namespace gatescope {
namespace fs = std::filesystem;

namespace {

constexpr char kModelFile[] = "model.pt";
constexpr char kServingConfigFile[] = "config.pbtxt";
// model_warmup's input_data_file names a file below this directory of the model (Triton's).
constexpr char kWarmUpDir[] = "warmup";

// The overrides in `path` (a resolved config.pbtxt); none if there is no such file.
absl::StatusOr<v1::ServingConfig> ReadServingConfig(const fs::path& path) {
  if (!fs::exists(path)) return v1::ServingConfig();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseServingConfig(text.str());
}

// The first `max_bytes` bytes of the warm-up file at `resolved` (a path inside the
// repository; `where` names it in errors), all of a shorter file: NOT_FOUND when it does
// not exist, INVALID_ARGUMENT when it is not a regular file, FAILED_PRECONDITION when it
// cannot be read, RESOURCE_EXHAUSTED when its bytes do not fit in memory.
absl::StatusOr<std::string> ReadWarmUpFile(const fs::path& resolved, const std::string& where,
                                           size_t max_bytes) {
  std::error_code ec;
  const fs::file_status status = fs::status(resolved, ec);
  if (status.type() == fs::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat(where, " does not exist"));
  }
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat(where, " cannot be read: ", ec.message()));
  }
  if (!fs::is_regular_file(status)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " is not a regular file"));
  }
  const uintmax_t size = fs::file_size(resolved, ec);
  std::ifstream in(resolved, std::ios::binary);
  if (ec || !in) return absl::FailedPreconditionError(absl::StrCat(where, " cannot be opened"));
  try {
    std::string bytes(static_cast<size_t>(std::min<uintmax_t>(size, max_bytes)), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (in.bad()) return absl::FailedPreconditionError(absl::StrCat(where, " could not be read"));
    bytes.resize(static_cast<size_t>(in.gcount()));
    return bytes;
  } catch (const std::exception& e) {  // std::bad_alloc, std::length_error
    return absl::ResourceExhaustedError(absl::StrCat(where, ": ", e.what()));
  }
}

// Whether `path` is `root` or lies below it, compared by whole components ("/repo2/m" is
// not inside "/repo"). Both absolute and normal.
bool IsWithin(const fs::path& root, const fs::path& path) {
  return std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first == root.end();
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
  const fs::path root = fs::is_directory(options.root, ec) ? fs::canonical(options.root, ec)
                                                           : fs::path();
  if (root.empty() || ec) {
    return absl::NotFoundError(absl::StrCat("model repository not found: ", options.root));
  }
  std::unique_ptr<ModelRepository> repo(
      new ModelRepository(options, std::move(deps), root.string()));
  for (const std::string& name : repo->ModelDirectories()) {
    repo->LoadModel(name).IgnoreError();  // a failed model stays listed as not ready
  }
  return repo;
}

ModelRepository::ModelRepository(RepositoryOptions options, RepositoryDeps deps,
                                 std::string canonical_root)
    : options_(std::move(options)), deps_(std::move(deps)), root_(std::move(canonical_root)) {}

absl::StatusOr<std::string> ModelRepository::ResolveInside(const std::string& path,
                                                           const std::string& what) const {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot resolve ", what, ": ", ec.message()));
  // weakly_canonical leaves a dangling last link unresolved; what it may point to later
  // is unknown, so it is refused rather than trusted.
  if (fs::is_symlink(fs::symlink_status(path, ec)) && !fs::exists(path, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(what, " is a dangling symlink"));
  }
  if (!IsWithin(fs::path(root_), resolved)) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " resolves outside the model repository (symlink); refused"));
  }
  return resolved.string();
}

absl::Status ModelRepository::InitModel(ServedModel& model, const std::string& model_dir,
                                        const std::string& path) const {
  GS_ASSIGN_OR_RETURN(const std::string config_file,
                      ResolveInside((fs::path(model_dir) / kServingConfigFile).string(),
                                    QuoteName(model.name + "/" + kServingConfigFile)));
  GS_ASSIGN_OR_RETURN(const v1::ServingConfig overrides, ReadServingConfig(config_file));
  GS_ASSIGN_OR_RETURN(const std::string json, deps_.loader->ReadMetadata(path));
  GS_ASSIGN_OR_RETURN(model.config, ParseModelConfig(json));
  const ArchiveReader archive = [this, &path](const std::string& name) {
    return deps_.loader->ReadExtraFile(path, name);
  };
  GS_ASSIGN_OR_RETURN(model.task, CreateTask(model.config, options_.tasks, archive));
  model.config = model.task->config();
  for (const std::string& ops : model.config.required_ops()) {
    GS_RETURN_IF_ERROR(deps_.loader->CheckOps(ops));
  }
  GS_ASSIGN_OR_RETURN(model.plan, MakeServingPlan(options_.defaults, model.config.max_batch_size(),
                                                  overrides, deps_.loader->Devices()));
  // A model_warmup sample that does not fit the model fails its load, warm-up on or off.
  // Its input_data_file (a relative path without "..": MakeServingPlan) must also resolve
  // inside the repository.
  const WarmUpFileReader warm_up_file =
      [this, &model, &model_dir](const std::string& file,
                                 size_t max_bytes) -> absl::StatusOr<std::string> {
    const std::string where =
        QuoteName(absl::StrCat(model.name, "/", kWarmUpDir, "/", file));
    GS_ASSIGN_OR_RETURN(const std::string resolved,
                        ResolveInside((fs::path(model_dir) / kWarmUpDir / file).string(), where));
    return ReadWarmUpFile(resolved, where, max_bytes);
  };
  GS_ASSIGN_OR_RETURN(std::vector<WarmUpCall> sample_calls,
                      SampleWarmUpCalls(model.plan.warm_up, *model.task, warm_up_file));
  return InitInstances(model, path, sample_calls);
}

absl::Status ModelRepository::InitInstances(ServedModel& model, const std::string& path,
                                            const std::vector<WarmUpCall>& sample_calls) const {
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
    // What the instance does, not what was asked: a server built without CUDA graphs, or
    // a device that refused them, records none, and its calls are neither bucketed for
    // graphs nor warmed up for them.
    InstanceSpec running = spec;
    running.cuda_graphs = (*runner)->RecordsCudaGraphs();
    const CallShapes shapes = CallShapesFor(**runner);
    const std::vector<int64_t> lengths = model.task->PaddedLengths(shapes);
    WarnOfGraphsBeyondTheLimit(model, running, lengths.size());
    if (options_.defaults.warm_up) {
      WarmUpInstance(model, WarmUpCalls(running, sample_calls, lengths), running, shapes,
                     **runner);
    }
    model.instances.push_back(std::make_unique<ModelInstance>(
        *std::move(runner), model.task.get(), deps_.clock, model.observer.get(),
        deps_.replies));
    executors.push_back(model.instances.back().get());
  }
  GS_ASSIGN_OR_RETURN(model.scheduler,
                      deps_.schedulers(std::move(executors), model.plan.batching,
                                       model.observer.get()));
  return absl::OkStatus();
}

void ModelRepository::WarnOfGraphsBeyondTheLimit(const ServedModel& model,
                                                 const InstanceSpec& spec, size_t lengths) const {
  if (!spec.cuda_graphs) return;
  const size_t shapes = std::max<size_t>(1, lengths) *
                        CudaGraphPolicy::Buckets(spec.max_batch_size).size();
  const size_t kept = static_cast<size_t>(CudaGraphPolicy::Limits{}.max_graphs);
  if (shapes <= kept) return;
  GS_LOG(WARNING) << model.name << " version " << model.version << " " << spec.name << ": "
                  << shapes << " input shapes (" << std::max<size_t>(1, lengths)
                  << " lengths x batch buckets up to " << spec.max_batch_size
                  << ") but an instance keeps " << kept
                  << " CUDA graphs; the shapes recorded last (the longest lengths) run "
                     "eagerly. A smaller max_batch_size or max_tokens fits them all";
}

void ModelRepository::WarmUpInstance(const ServedModel& model,
                                     const std::vector<WarmUpCall>& calls,
                                     const InstanceSpec& spec, const CallShapes& shapes,
                                     ModelRunner& runner) const {
  const absl::Time start = absl::Now();
  absl::Status warmed;
  {
    // As the instance's worker will run them: on the forward CPUs, under the policy the
    // process started with (thread pools the first forwards start inherit it).
    const ForwardPassScheduling forwards;
    warmed = WarmUp(runner, *model.task, calls, shapes);
  }
  const std::string who = absl::StrCat(model.name, " version ", model.version, " ", spec.name);
  if (!warmed.ok()) {
    // A warm-up example is not a request: a model may refuse it and still serve.
    GS_LOG(WARNING) << who << ": warm-up stopped, serving without it: " << warmed;
    return;
  }
  int forwards = 0;
  for (const WarmUpCall& call : calls) forwards += call.count;
  GS_LOG(INFO) << who << ": warmed up with " << forwards << " forward(s) in "
               << absl::ToDoubleMilliseconds(absl::Now() - start) << " ms";
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
  // The files loading reads (config.pbtxt, the card, every <version>/model.pt), each with
  // where it resolves (re-pointing an in-repository link is a change) and its modification
  // time. Nothing outside the root is looked at: a refused path only contributes its refusal.
  const fs::path dir = fs::path(options_.root) / name;
  if (!ResolveInside(dir.string(), name).ok()) return "refused";
  std::vector<fs::path> files = {dir / kServingConfigFile, dir / kModelCardFile};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    files.push_back(entry.path() / kModelFile);
  }
  // model_warmup's files, a sample's data being part of what loads: the first 1000 entries
  // below warmup/ (not into linked directories), when it resolves inside the root.
  if (ResolveInside((dir / kWarmUpDir).string(), name).ok()) {
    int warm_up_files = 0;
    for (auto it = fs::recursive_directory_iterator(dir / kWarmUpDir, ec);
         !ec && it != fs::recursive_directory_iterator() && warm_up_files < 1000;
         it.increment(ec), ++warm_up_files) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  std::string print;
  for (const auto& f : files) {
    absl::StatusOr<std::string> resolved = ResolveInside(f.string(), f.string());
    if (!resolved.ok()) {
      absl::StrAppend(&print, f.string(), " refused;");
    } else if (fs::exists(*resolved, ec)) {
      const auto t = fs::last_write_time(*resolved, ec).time_since_epoch().count();
      absl::StrAppend(&print, f.string(), "->", *resolved, "@", t, ";");
    }
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
  Versions versions = LoadModelDirectory(name, model_dir.string());
  absl::Status first_error = absl::NotFoundError(
      absl::StrCat("model '", name, "' has no <version>/", kModelFile));
  bool any_ready = false;
  for (const auto& [version, model] : versions) {
    any_ready |= model->ready();
    if (!model->ready() && first_error.code() == absl::StatusCode::kNotFound) {
      first_error = model->load_status;
    }
  }
  Versions old;
  bool kept_old = false;
  bool stopping = false;
  {
    absl::MutexLock lock(&mu_);
    // A load (its warm-up forwards included) may outlast a StopAll that began meanwhile.
    // StopAll sets stopped_ before it lists the models under mu_, so checked here, either
    // StopAll stops these versions or they are stopped below.
    stopping = stopped_.load();
    if (!stopping) {
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
  }
  if (stopping) {
    StopVersions(versions);
    return absl::UnavailableError("server is shutting down");
  }
  if (kept_old) {
    StopVersions(versions);
    GS_LOG(ERROR) << "reload of " << name << " failed; still serving the loaded versions";
    return first_error;
  }
  deps_.metrics->ForModel(name)->ready->Set(any_ready ? 1 : 0);
  if (any_ready) {
    ExportReferences(name);
  } else {
    deps_.metrics->ForModel(name)->SetReferences({}).IgnoreError();  // empty: always OK
  }
  NotifyState(name);
  StopVersions(old);  // drains requests already queued on the replaced versions
  return any_ready ? absl::OkStatus() : first_error;
}

void ModelRepository::ExportReferences(const std::string& name) const {
  ModelMetrics* metrics = deps_.metrics->ForModel(name);
  absl::StatusOr<std::string> card =
      ResolveInside((fs::path(options_.root) / name / kModelCardFile).string(),
                    QuoteName(name + "/" + kModelCardFile));
  absl::Status st = card.status();
  if (st.ok()) {
    absl::StatusOr<std::vector<StatisticReference>> references = ReadMonitoringReference(*card);
    st = references.ok() ? metrics->SetReferences(*references) : references.status();
  }
  if (!st.ok()) {
    GS_LOG(WARNING) << "model " << name << ": no drift references exported: "
                    << HideRepositoryPath(st, {root_, options_.root});
    metrics->SetReferences({}).IgnoreError();  // empty: always OK
  }
}

ModelRepository::Versions ModelRepository::LoadModelDirectory(const std::string& name,
                                                              const std::string& model_dir) const {
  absl::StatusOr<std::string> dir =
      ResolveInside(model_dir, absl::StrCat("model directory ", QuoteName(name)));
  if (dir.ok()) return LoadVersions(name, *dir);
  GS_LOG(ERROR) << "refusing model " << name << ": " << dir.status();
  Versions refused;
  refused[""] = NewVersion(name, "", dir.status());
  return refused;
}

ModelRepository::Versions ModelRepository::LoadVersions(const std::string& name,
                                                        const std::string& model_dir) const {
  Versions versions;
  std::error_code ec;
  for (const auto& version_dir : fs::directory_iterator(model_dir, ec)) {
    const std::string version = version_dir.path().filename().string();
    if (!version_dir.is_directory() || !fs::exists(version_dir.path() / kModelFile)) continue;
    if (!IsVersionName(version)) {
      GS_LOG(WARNING) << "ignoring " << name << "/" << version
                      << ": a version directory is named by a positive integer";
      continue;
    }
    versions[version] = LoadVersion(name, version, model_dir);
  }
  return versions;
}

std::shared_ptr<ServedModel> ModelRepository::LoadVersion(const std::string& name,
                                                          const std::string& version,
                                                          const std::string& model_dir) const {
  const std::string where = name + "/" + version;
  absl::StatusOr<std::string> file =
      ResolveInside((fs::path(model_dir) / version).string(),
                    absl::StrCat("version directory ", QuoteName(where)));
  if (file.ok()) {
    file = ResolveInside((fs::path(*file) / kModelFile).string(),
                         QuoteName(absl::StrCat(where, "/", kModelFile)));
  }
  auto model = NewVersion(name, version, file.status());
  if (file.ok()) {
    model->load_status =
        HideRepositoryPath(InitModel(*model, model_dir, *file), {root_, options_.root});
  }
  if (model->load_status.ok() && model->config.name() != model->name) {
    GS_LOG(WARNING) << "model " << model->name << " declares name '" << model->config.name()
                    << "'; serving it as " << model->name;
  }
  if (model->ready()) {
    GS_LOG(INFO) << "loaded " << name << " version " << version;
  } else {
    GS_LOG(ERROR) << "failed to load " << where << ": " << model->load_status;
  }
  return model;
}

std::shared_ptr<ServedModel> ModelRepository::NewVersion(const std::string& name,
                                                         const std::string& version,
                                                         absl::Status status) const {
  auto model = std::make_shared<ServedModel>();
  model->name = name;
  model->version = version;
  model->metrics = deps_.metrics->ForModel(name);
  model->load_status = std::move(status);
  return model;
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
  deps_.metrics->ForModel(name)->SetReferences({}).IgnoreError();  // empty: always OK
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

bool ModelRepository::ServesEveryModel() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, versions] : models_) {
    bool serving = false;
    for (const auto& [version, model] : versions) serving |= model->ready();
    if (!serving) return false;
  }
  return true;
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
