// One loaded (or failed) model version: its task, its instances (each a runner on its
// device) and the scheduler feeding them. Shared by the repository and in-flight requests
// (a replaced version lives until its last request finishes); immutable after loading
// except through its thread-safe scheduler.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/batching/scheduler.h"
#include "server/config/model_config.h"
#include "server/config/serving_config.h"
#include "server/metrics/server_metrics.h"
#include "server/repository/metrics_observer.h"
#include "server/tasks/model_instance.h"
#include "server/tasks/task.h"

namespace gatescope {

struct ServedModel {
  std::string name;
  std::string version;
  absl::Status load_status;  // not OK: the model failed to load and answers UNAVAILABLE
  // The metadata (with the task's defaults once the task exists; as parsed, or empty, if
  // loading failed earlier).
  ModelConfig config;
  std::unique_ptr<Task> task;       // set when ready
  ModelMetrics* metrics = nullptr;  // owned by ServerMetrics
  ServingPlan plan;                 // batching and instances in effect
  std::unique_ptr<MetricsObserver> observer;  // feeds `metrics`
  std::vector<std::unique_ptr<ModelInstance>> instances;
  std::unique_ptr<Scheduler> scheduler;  // drives `instances`; declared after them, stops first

  bool ready() const { return load_status.ok(); }
  ~ServedModel() {
    if (scheduler) scheduler->Stop();
  }
};

}  // namespace gatescope
