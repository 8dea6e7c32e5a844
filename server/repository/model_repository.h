// The set of served models, read from <root>/<model>/<version>/model.pt at start.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  // Scans `options.root` and loads every <model>/<version>/model.pt with `loader` (once per
  // instance). A model that fails to load, or whose config.pbtxt is invalid, is kept as
  // not ready (its error logged). NOT_FOUND if root is not a
  // directory. `metrics` is not owned and must outlive the repository.
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Load(const RepositoryOptions& options,
                                                               const RunnerLoader& loader,
                                                               ServerMetrics* metrics);
  ~ModelRepository();

  // The named model at `version`; when `version` is empty, its highest version that loaded
  // (or its highest version if none did). NOT_FOUND if absent. Thread-safe.
  absl::StatusOr<std::shared_ptr<ServedModel>> Find(const std::string& name,
                                                    const std::string& version) const;

  // Every model version, ordered by name then version. Thread-safe.
  std::vector<std::shared_ptr<ServedModel>> List() const;

  // Stops every scheduler after draining its queue. Blocks; idempotent.
  void StopAll();

 private:
  ModelRepository() = default;
  // name -> version -> model; numeric versions order by value, before any others.
  struct VersionLess {
    bool operator()(const std::string& a, const std::string& b) const;
  };
  std::map<std::string, std::map<std::string, std::shared_ptr<ServedModel>, VersionLess>> models_;
};

}  // namespace gatescope
