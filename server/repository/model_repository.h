// The set of served models, read from <root>/<model>/<version>/model.pt at start.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/batching/dynamic_batcher.h"
#include "server/config/serving_config.h"
#include "server/config/model_config.h"
#include "server/metrics/server_metrics.h"
#include "server/repository/metrics_observer.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

// One loaded (or failed) model version. Shared by the repository and in-flight requests;
// immutable after loading except through its thread-safe scheduler.
struct ServedModel {
  std::string name;
  std::string version;
  absl::Status load_status;  // not OK: the model failed to load and answers UNAVAILABLE
  ModelConfig config;
  ModelMetrics* metrics = nullptr;  // owned by ServerMetrics
  ServingPlan plan;                 // batching and instance count in effect
  std::vector<std::unique_ptr<ModelRunner>> instances;
  std::unique_ptr<SchedulerObserver> observer;  // feeds `metrics`
  std::unique_ptr<Scheduler> scheduler;  // drives `instances`; declared after them, stops first
  bool ready() const { return load_status.ok(); }
  ~ServedModel();
};

struct RepositoryOptions {
  std::string root;
  // Applied to every model, then overridden by <root>/<model>/config.pbtxt if present.
  ServingDefaults defaults;
};

// What loading one model file yields: a runner plus its metadata JSON.
struct LoadedRunner {
  std::unique_ptr<ModelRunner> runner;
  std::string metadata_json;
};
using RunnerLoader = std::function<absl::StatusOr<LoadedRunner>(const std::string& path)>;

class ModelRepository {
 public:
  // Called with a model name and whether its default version is ready, after every load,
  // reload or unload. Runs on the thread that changed the model; must not call back into
  // LoadModel/UnloadModel.
  using StateListener = std::function<void(const std::string& name, bool ready)>;

  // Scans `options.root` and loads every <model>/<version>/model.pt with `loader` (once per
  // instance). A model that fails to load, or whose config.pbtxt is invalid, is kept as
  // not ready (its error logged). NOT_FOUND if root is not a directory. `metrics` is not
  // owned and must outlive the repository.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Load(const RepositoryOptions& options,
                                                               const RunnerLoader& loader,
                                                               ServerMetrics* metrics);
  ~ModelRepository();

  // Loads, or reloads, every version of <root>/<name>. The new versions replace the old
  // ones at once; requests already queued on the old ones still finish. If no new version
  // becomes ready while an old one serves, the old ones stay. Blocks for the whole load
  // (call it off request threads). Thread-safe; loads, unloads and polls are serialised.
  // NOT_FOUND if the directory is missing; the load error if no version became ready;
  // UNAVAILABLE after StopAll.
  absl::Status LoadModel(const std::string& name);

  // Removes the model; queued requests finish first. Blocks until they have. Thread-safe.
  absl::Status UnloadModel(const std::string& name);

  // Reconciles with the directory: loads new models, reloads ones whose model.pt or
  // config.pbtxt changed, unloads removed ones. Blocks. Thread-safe.
  void Poll();

  void SetStateListener(StateListener listener);

  // Names of the model directories under the root now (loaded or not), sorted.
  std::vector<std::string> ModelDirectories() const;

  // The named model at `version`; when `version` is empty, its highest version that loaded
  // (or its highest version if none did). NOT_FOUND if absent. Thread-safe.
  absl::StatusOr<std::shared_ptr<ServedModel>> Find(const std::string& name,
                                                    const std::string& version) const;

  // Every model version, ordered by name then version. Thread-safe.
  std::vector<std::shared_ptr<ServedModel>> List() const;

  // Stops every scheduler after draining its queue, and refuses later loads and unloads.
  // Blocks; idempotent; safe beside a concurrent load.
  void StopAll();

 private:
  // name -> version -> model; numeric versions order by value, before any others.
  struct VersionLess {
    bool operator()(const std::string& a, const std::string& b) const;
  };
  using Versions = std::map<std::string, std::shared_ptr<ServedModel>, VersionLess>;

  ModelRepository(RepositoryOptions options, RunnerLoader loader, ServerMetrics* metrics);
  absl::Status LoadModelLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  absl::Status UnloadModelLocked(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  std::string Fingerprint(const std::string& name) const;
  void NotifyState(const std::string& name);
  static void StopVersions(const Versions& versions);

  const RepositoryOptions options_;
  const RunnerLoader loader_;
  ServerMetrics* const metrics_;
  absl::Mutex control_mu_;  // held across a whole load / unload / poll; never by Find
  std::atomic<bool> stopped_{false};
  mutable absl::Mutex mu_;
  std::map<std::string, Versions> models_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> fingerprints_ ABSL_GUARDED_BY(mu_);
  StateListener listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope
