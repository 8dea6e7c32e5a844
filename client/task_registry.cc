// The tasks gatescope-client can render, by ModelConfig.task.
//
// Adding a task to the client is one new file plus one registration line:
//   1. client/tasks/<task>.cc implements TaskOutput (task_output.h) and defines its factory,
//        extern const TaskFactory k<Name>Output = &NewOutput<<Name>Output>;
//      (client/CMakeLists.txt compiles every file in client/tasks/);
//   2. one GATESCOPE_TASK line below maps the task name to that factory.
// No command changes: they only call TaskOutput.
#include "client/task_output.h"

namespace gatescope::client {

#define GATESCOPE_CLIENT_TASKS(GATESCOPE_TASK)                  \
  GATESCOPE_TASK("image_classification", kClassificationOutput) \
  GATESCOPE_TASK("image_segmentation", kSegmentationOutput)     \
  GATESCOPE_TASK("object_detection", kDetectionOutput)          \
  GATESCOPE_TASK("text_classification", kTextClassificationOutput)

// Each factory's declaration, then the table.
#define GATESCOPE_DECLARE_FACTORY(task, factory) extern const TaskFactory factory;
GATESCOPE_CLIENT_TASKS(GATESCOPE_DECLARE_FACTORY)
#undef GATESCOPE_DECLARE_FACTORY

namespace {

struct TaskEntry {
  const char* task;
  const TaskFactory* factory;
};

#define GATESCOPE_TASK_ENTRY(task, factory) {task, &factory},
constexpr TaskEntry kTasks[] = {GATESCOPE_CLIENT_TASKS(GATESCOPE_TASK_ENTRY)};
#undef GATESCOPE_TASK_ENTRY

}  // namespace

absl::StatusOr<std::unique_ptr<TaskOutput>> NewTaskOutput(const std::string& task,
                                                          OutputSettings settings) {
  std::string known;
  for (const TaskEntry& entry : kTasks) {
    if (task == entry.task) return (*entry.factory)(std::move(settings));
    known += (known.empty() ? "" : ", ") + std::string(entry.task);
  }
  return absl::InvalidArgumentError("gatescope-client cannot show results of task '" + task +
                                    "' (it knows " + known + ")");
}

}  // namespace gatescope::client
