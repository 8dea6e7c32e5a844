// The set of served models, read from <root>/<model>/<version>/model.pt (with optional
// <root>/<model>/config.pbtxt), and changed at run time by load, unload and poll. Model and
// version directory names follow repository_names.h; other entries are ignored.
//
// Symlinks: a model directory, version directory, model.pt or config.pbtxt is used only
// if it resolves (every symlink followed) inside the repository root, compared by path
// components. Symlinks that stay inside (an alias model directory, a version shared by
// two models) are followed; one that leaves the root is refused with PERMISSION_DENIED:
// a refused model directory is listed as one not-ready entry of version "" carrying the
// reason, a refused version (or file) as that version not ready; nothing outside the
// root is read. Loading uses the resolved paths, so re-pointing a link after the check
// does not redirect the load (docs/reliability.md).
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
#include "server/batching/preparation_pool.h"
#include "server/batching/scheduler.h"
#include "server/common/clock.h"
#include "server/config/serving_config.h"
#include "server/metrics/server_metrics.h"
#include "server/repository/served_model.h"
#include "server/runtime/model_loader.h"
#include "server/tasks/instance_warm_up.h"
#include "server/tasks/task.h"

namespace gatescope {

struct RepositoryOptions {
  std::string root;
  // Applied to every model, then overridden by <root>/<model>/config.pbtxt if present.
  ServingDefaults defaults;
  TaskOptions tasks;
};

// What the repository builds models with. Not owned; everything must outlive the
// repository.
struct RepositoryDeps {
  const ModelLoader* loader = nullptr;
  ServerMetrics* metrics = nullptr;
  SchedulerFactory schedulers;  // e.g. DynamicBatcher::Factory(clock)
  const Clock* clock = nullptr;  // for the instances' timings
  // If set, where the instances finish their predictions (ModelInstance's `replies`);
  // outlives the repository.
  PreparationPool* replies = nullptr;
};

class ModelRepository {
 public:
  // Called with a model name and whether its default version is ready, after every load,
  // reload or unload. Runs on the thread that changed the model; must not call back into
  // LoadModel/UnloadModel.
  using StateListener = std::function<void(const std::string& name, bool ready)>;

  // Scans `options.root` and loads every <model>/<version>/model.pt: its metadata, its
  // task (CreateTask), the op libraries it requires, then one runner per instance of its
  // serving plan, each on its device. A model that fails any step, or whose config.pbtxt
  // is invalid, is kept as not ready with that reason (logged); the others serve.
  // NOT_FOUND if root is not a directory; INVALID_ARGUMENT if `deps` is incomplete.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Load(const RepositoryOptions& options,
                                                               RepositoryDeps deps);
  ~ModelRepository();

  // Loads, or reloads, every version of <root>/<name>. The new versions replace the old
  // ones at once; requests already queued on the old ones still finish. If no new version
  // becomes ready while an old one serves, the old ones stay. Blocks for the whole load
  // (call it off request threads). Thread-safe; loads, unloads and polls are serialised.
  // NOT_FOUND if the directory is missing; the load error if no version became ready;
  // UNAVAILABLE after StopAll.
  absl::Status LoadModel(const std::string& name);

  // Removes the model; queued requests run first. Blocks until they have run (with a reply
  // pool, the last replies may still be going out on its threads). Thread-safe.
  absl::Status UnloadModel(const std::string& name);

  // Reconciles with the directory: loads new models, reloads ones whose model.pt or
  // config.pbtxt changed, unloads removed ones. Blocks. Thread-safe.
  void Poll();

  void SetStateListener(StateListener listener);

  // Names of the model directories under the root now (loaded or not), sorted; only
  // directories whose names are valid model names (repository_names.h).
  std::vector<std::string> ModelDirectories() const;

  // The named model at `version`; when `version` is empty, its highest version that loaded
  // (or its highest version if none did). NOT_FOUND if absent. Thread-safe.
  absl::StatusOr<std::shared_ptr<ServedModel>> Find(const std::string& name,
                                                    const std::string& version) const;

  // Every model version, ordered by name then version. Thread-safe.
  std::vector<std::shared_ptr<ServedModel>> List() const;

  // True when every model answers unversioned requests: each name has at least one version
  // that loaded. A version that failed beside a serving one (a corrupt upload in poll mode)
  // shows in List() and RepositoryIndex but does not make the server unready. Thread-safe.
  bool ServesEveryModel() const;

  // Stops every scheduler after draining its queue, and refuses later loads and unloads.
  // Blocks; idempotent; safe beside a concurrent load.
  void StopAll();

 private:
  // name -> version -> model; numeric versions order by value, before any others.
  struct VersionLess {
    bool operator()(const std::string& a, const std::string& b) const;
  };
  using Versions = std::map<std::string, std::shared_ptr<ServedModel>, VersionLess>;

  ModelRepository(RepositoryOptions options, RepositoryDeps deps, std::string canonical_root);
  // `path` with every symlink resolved (it need not exist) when that lies inside the root;
  // PERMISSION_DENIED naming `what` (never the root or the target) when it leaves it;
  // NOT_FOUND when it cannot be resolved.
  absl::StatusOr<std::string> ResolveInside(const std::string& path, const std::string& what) const;
  // The versions of <root>/<name>: one refused entry (version "") if the directory
  // resolves outside the root, else LoadVersions of where it resolves.
  Versions LoadModelDirectory(const std::string& name, const std::string& model_dir) const;
  // Every <version>/model.pt of the (resolved) model directory, each loaded or failed.
  Versions LoadVersions(const std::string& name, const std::string& model_dir) const;
  std::shared_ptr<ServedModel> LoadVersion(const std::string& name, const std::string& version,
                                           const std::string& model_dir) const;
  std::shared_ptr<ServedModel> NewVersion(const std::string& name, const std::string& version,
                                          absl::Status status) const;
  absl::Status InitModel(ServedModel& model, const std::string& model_dir,
                         const std::string& path) const;
  // `sample_calls`: the model's model_warmup calls (SampleWarmUpCalls), made once.
  absl::Status InitInstances(ServedModel& model, const std::string& path,
                             const std::vector<WarmUpCall>& sample_calls) const;
  // Runs the instance's warm-up `calls` (instance_warm_up.h) on the loading thread, gathered
  // with the instance's `shapes`, before the instance joins its model; a failure is logged
  // and the instance serves anyway.
  void WarmUpInstance(const ServedModel& model, const std::vector<WarmUpCall>& calls,
                      const InstanceSpec& spec, const CallShapes& shapes,
                      ModelRunner& runner) const;
  // Logs a warning when an instance that records CUDA graphs (`spec` as it runs) would
  // take more input shapes (`lengths` padded lengths, or one size, times its batch
  // buckets) than CudaGraphPolicy keeps graphs for.
  void WarnOfGraphsBeyondTheLimit(const ServedModel& model, const InstanceSpec& spec,
                                  size_t lengths) const;
  absl::Status LoadModelLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  absl::Status UnloadModelLocked(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  std::string Fingerprint(const std::string& name) const;
  // Exports the references of <root>/<name>'s card (monitoring_reference.h) as the model's
  // reference series, replacing earlier ones; a card without references, or one that cannot
  // be read or parsed (logged), leaves none. Called on each (re)load that took effect.
  void ExportReferences(const std::string& name) const;
  void NotifyState(const std::string& name);
  static void StopVersions(const Versions& versions);

  const RepositoryOptions options_;
  const RepositoryDeps deps_;
  const std::string root_;  // options_.root with symlinks resolved
  absl::Mutex control_mu_;  // held across a whole load / unload / poll; never by Find
  std::atomic<bool> stopped_{false};
  mutable absl::Mutex mu_;
  std::map<std::string, Versions> models_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> fingerprints_ ABSL_GUARDED_BY(mu_);
  StateListener listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope
