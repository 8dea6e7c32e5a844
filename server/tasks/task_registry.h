// The tasks the server knows, by the name a model's metadata gives (ModelConfig.task).
//
// Adding a task touches exactly: its implementation (server/tasks/<task>_task.{h,cc}),
// one line in kTasks (task_registry.cc), one source line in server/tasks/CMakeLists.txt;
// and, for the command-line client, its output file and one registration line (see
// client/). Frontends, batching, repository and runtime stay as they are.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"
#include "server/tasks/task.h"

namespace gatescope {

// The task `config.task` names, after it has checked the rest of the metadata
// (INVALID_ARGUMENT naming the field; an unknown task lists the known ones).
absl::StatusOr<std::unique_ptr<Task>> CreateTask(const ModelConfig& config,
                                                 const TaskOptions& options);

// INVALID_ARGUMENT when `request` carries a KServe parameter that another task owns
// (e.g. max_detections on a classifier): tasks declare the parameters they take.
absl::Status RefuseOtherTasksParameters(const ::inference::ModelInferRequest& request,
                                        absl::string_view task);

}  // namespace gatescope
