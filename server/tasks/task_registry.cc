#include "server/tasks/task_registry.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

// Every task the server knows; each entry is defined in <task>_task.cc.
#define GATESCOPE_TASKS(X) \
  X(kClassificationTask) X(kSegmentationTask) X(kDetectionTask) X(kTextClassificationTask)

namespace gatescope {

#define GATESCOPE_DECLARE_TASK(entry) extern const TaskEntry entry;
GATESCOPE_TASKS(GATESCOPE_DECLARE_TASK)

namespace {

#define GATESCOPE_TASK_ADDRESS(entry) &entry,
const TaskEntry* const kTasks[] = {GATESCOPE_TASKS(GATESCOPE_TASK_ADDRESS)};

}  // namespace

absl::StatusOr<std::unique_ptr<Task>> CreateTask(const ModelConfig& config,
                                                 const TaskOptions& options,
                                                 const ArchiveReader& archive) {
  const ArchiveReader none = [](const std::string& name) -> absl::StatusOr<std::string> {
    return absl::NotFoundError(absl::StrCat("no model archive to read '", name, "' from"));
  };
  std::vector<std::string> known;
  for (const TaskEntry* entry : kTasks) {
    if (config.task() == entry->name) return entry->create(config, options, archive ? archive : none);
    known.push_back(entry->name);
  }
  return absl::InvalidArgumentError(absl::StrCat("model config: unsupported task '",
                                                 config.task(), "' (",
                                                 absl::StrJoin(known, ", "), ")"));
}

absl::Status RefuseOtherTasksParameters(const ::inference::ModelInferRequest& request,
                                        absl::string_view task) {
  std::vector<std::string> own;
  for (const TaskEntry* entry : kTasks) {
    if (entry->name == task) own = entry->parameters();
  }
  const auto is_own = [&own](const std::string& name) {
    return std::find(own.begin(), own.end(), name) != own.end();
  };
  for (const TaskEntry* entry : kTasks) {
    if (entry->name == task) continue;
    for (const std::string& name : entry->parameters()) {
      if (request.parameters().contains(name) && !is_own(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter '", name, "' applies to ", entry->name, " models only, not to ", task,
            " models"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// Whether `task` lists the v1 field `name`, and which task first lists it.
bool Lists(const TaskEntry& entry, const std::string& name) {
  for (const std::string& f : entry.v1_fields()) {
    if (f == name) return true;
  }
  return false;
}

}  // namespace

absl::Status RefuseOtherTasksFields(const google::protobuf::Message& request,
                                    absl::string_view task) {
  const TaskEntry* own = nullptr;
  for (const TaskEntry* entry : kTasks) {
    if (entry->name == task) own = entry;
  }
  std::vector<const google::protobuf::FieldDescriptor*> set;
  request.GetReflection()->ListFields(request, &set);
  for (const auto* field : set) {
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE && !field->is_repeated() &&
        request.GetReflection()->GetMessage(request, field).ByteSizeLong() == 0) {
      continue;  // present but all defaults, e.g. an empty rollout_options
    }
    if (own != nullptr && Lists(*own, field->name())) continue;
    for (const TaskEntry* entry : kTasks) {
      if (entry != own && Lists(*entry, field->name())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field '", field->name(), "' applies to ", entry->name, " models, not to ", task,
            " models"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gatescope
