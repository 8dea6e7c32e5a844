#include "server/tasks/task_registry.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/tasks/classification_task.h"
#include "server/tasks/detection_task.h"
#include "server/tasks/segmentation_task.h"

namespace gatescope {
namespace {

struct TaskEntry {
  const char* name;
  absl::StatusOr<std::unique_ptr<Task>> (*create)(const ModelConfig&, const TaskOptions&);
  std::vector<std::string> (*parameters)();  // KServe request parameters it owns
};

const TaskEntry kTasks[] = {
    {ClassificationTask::kName, ClassificationTask::Create, ClassificationTask::Parameters},
    {SegmentationTask::kName, SegmentationTask::Create, SegmentationTask::Parameters},
    {DetectionTask::kName, DetectionTask::Create, DetectionTask::Parameters},
};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> CreateTask(const ModelConfig& config,
                                                 const TaskOptions& options) {
  std::vector<std::string> known;
  for (const TaskEntry& entry : kTasks) {
    if (config.task() == entry.name) return entry.create(config, options);
    known.push_back(entry.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("model config: unsupported task '",
                                                 config.task(), "' (",
                                                 absl::StrJoin(known, ", "), ")"));
}

absl::Status RefuseOtherTasksParameters(const ::inference::ModelInferRequest& request,
                                        absl::string_view task) {
  for (const TaskEntry& entry : kTasks) {
    if (entry.name == task) continue;
    for (const std::string& name : entry.parameters()) {
      if (request.parameters().contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter '", name, "' applies to ", entry.name, " models only, not to ", task,
            " models"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gatescope
