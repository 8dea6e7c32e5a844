// The tasks the server knows, by the name a model's metadata gives (ModelConfig.task).
//
// Adding a task touches exactly: its implementation, a new server/tasks/<task>_task.cc
// (compiled because of its name) that defines its TaskEntry, and its entry's name in the
// GATESCOPE_TASKS line of task_registry.cc. For the command-line client: a new
// client/tasks/<task>.cc and one line in client/task_registry.cc. Frontends, batching,
// repository, runtime and the client's commands stay as they are.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "inference/grpc_service.pb.h"
#include "server/tasks/task.h"

namespace gatescope {

// One task as the registry knows it; each task's .cc file defines one, constant.
struct TaskEntry {
  const char* name;  // ModelConfig.task
  // The task for `config` after checking the rest of its metadata (INVALID_ARGUMENT
  // naming the field).
  absl::StatusOr<std::unique_ptr<Task>> (*create)(const ModelConfig& config,
                                                  const TaskOptions& options,
                                                  const ArchiveReader& archive);
  // The KServe request parameters it takes (other tasks refuse them).
  std::vector<std::string> (*parameters)();
  // The gatescope.v1 request fields (by proto name) it takes that not every task takes;
  // a task that does not list a field another task lists refuses it. Fields no task lists
  // (input, model, top_k, ...) are every task's.
  std::vector<std::string> (*v1_fields)();
};

// The task `config.task` names (an unknown task: INVALID_ARGUMENT listing the known ones).
// `archive` reads the model archive's extra files (only tasks that need them call it).
absl::StatusOr<std::unique_ptr<Task>> CreateTask(const ModelConfig& config,
                                                 const TaskOptions& options,
                                                 const ArchiveReader& archive = nullptr);

// INVALID_ARGUMENT when `request` carries a KServe parameter that another task lists and
// `task` does not (e.g. max_detections on a classifier).
absl::Status RefuseOtherTasksParameters(const ::inference::ModelInferRequest& request,
                                        absl::string_view task);

// INVALID_ARGUMENT when the gatescope.v1 `request` (PredictRequest, ExplainRequest) sets a
// field that other tasks list and `task` does not (e.g. query_pixel on a classifier). A
// message field counts as set when it holds a value other than its defaults.
absl::Status RefuseOtherTasksFields(const google::protobuf::Message& request,
                                    absl::string_view task);

}  // namespace gatescope
