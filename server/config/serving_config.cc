#include "server/config/serving_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/status_macros.h"

namespace gatescope {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty()) first = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  std::string first;
};

using Group = ::inference::ModelInstanceGroup;

constexpr uint64_t kMaxMicroseconds = uint64_t{1} << 40;
constexpr int64_t kMaxInstances = 64;

// One group with KIND_AUTO resolved and the GPUs of KIND_GPU listed.
absl::StatusOr<Group> ResolveGroup(Group g, const DeviceInventory& devices) {
  if (g.count() < 0) return absl::InvalidArgumentError("instance_group.count must be >= 1");
  if (g.count() == 0) g.set_count(1);  // Triton's default when count is not given
  if (g.kind() == Group::KIND_MODEL) {
    return absl::InvalidArgumentError("instance_group kind KIND_MODEL is not supported");
  }
  if (g.kind() == Group::KIND_AUTO) g.set_kind(devices.gpus > 0 ? Group::KIND_GPU : Group::KIND_CPU);
  if (g.kind() == Group::KIND_CPU) {
    if (g.gpus_size() > 0) return absl::InvalidArgumentError("instance_group KIND_CPU lists gpus");
    return g;
  }
  for (int device : g.gpus()) {
    if (device < 0) return absl::InvalidArgumentError("instance_group.gpus must be >= 0");
  }
  if (g.gpus_size() == 0) {
    if (devices.gpus == 0) {
      return absl::UnavailableError(absl::StrCat(
          "instance_group KIND_GPU: no GPU is visible to this server (", devices.no_gpu_reason,
          ")"));
    }
    for (int d = 0; d < devices.gpus; ++d) g.add_gpus(d);
  }
  return g;
}

absl::StatusOr<std::vector<Group>> ResolveGroups(const ServingDefaults& defaults,
                                                 const v1::ServingConfig& overrides,
                                                 const DeviceInventory& devices) {
  std::vector<Group> groups;
  if (overrides.instance_group_size() == 0) {
    Group g;
    g.set_count(defaults.instances);
    g.set_kind(Group::KIND_CPU);
    groups.push_back(std::move(g));
  }
  for (const Group& g : overrides.instance_group()) {
    GS_ASSIGN_OR_RETURN(Group resolved, ResolveGroup(g, devices));
    groups.push_back(std::move(resolved));
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].name().empty()) groups[i].set_name(absl::StrCat("group", i));
  }
  return groups;
}

}  // namespace

absl::StatusOr<v1::ServingConfig> ParseServingConfig(std::string_view text) {
  v1::ServingConfig config;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return absl::InvalidArgumentError(absl::StrCat("config.pbtxt: ", errors.first));
  }
  return config;
}

namespace {

absl::StatusOr<DynamicBatchingConfig> MakeBatching(const ServingDefaults& defaults,
                                                   int model_max_batch_size,
                                                   const v1::ServingConfig& overrides) {
  DynamicBatchingConfig b;
  b.max_batch_size = defaults.max_batch_size;
  if (model_max_batch_size > 0) b.max_batch_size = std::min(b.max_batch_size, model_max_batch_size);
  if (overrides.max_batch_size() > 0) b.max_batch_size = overrides.max_batch_size();
  b.max_queue_delay = defaults.max_queue_delay;
  b.release_when_arrivals_are_sparse = defaults.early_batch_release;
  b.idle_poll = defaults.idle_poll;
  b.queue_policy.max_queue_size = defaults.max_queue_size;
  if (overrides.has_dynamic_batching()) {
    const auto& db = overrides.dynamic_batching();
    b.preferred_batch_sizes.assign(db.preferred_batch_size().begin(),
                                   db.preferred_batch_size().end());
    const auto& qp = db.default_queue_policy();
    if (db.max_queue_delay_microseconds() > kMaxMicroseconds ||
        qp.default_timeout_microseconds() > kMaxMicroseconds) {
      return absl::InvalidArgumentError("timeouts and delays must be below 2^40 microseconds");
    }
    b.max_queue_delay = absl::Microseconds(db.max_queue_delay_microseconds());
    if (db.priority_levels() > kMaxPriorityLevels ||
        db.default_priority_level() > kMaxPriorityLevels) {
      return absl::InvalidArgumentError(
          absl::StrCat("priority levels must be at most ", kMaxPriorityLevels));
    }
    b.priority_levels = static_cast<int>(db.priority_levels());
    b.default_priority_level = static_cast<int>(db.default_priority_level());
    if (db.has_default_queue_policy()) {
      b.queue_policy.timeout_action = qp.timeout_action() == ::inference::ModelQueuePolicy::DELAY
                                          ? QueuePolicy::TimeoutAction::kDelay
                                          : QueuePolicy::TimeoutAction::kReject;
      if (qp.default_timeout_microseconds() > 0) {
        b.queue_policy.default_timeout = absl::Microseconds(qp.default_timeout_microseconds());
      }
      b.queue_policy.allow_timeout_override = qp.allow_timeout_override();
      if (qp.max_queue_size() > 0) {
        b.queue_policy.max_queue_size = static_cast<int>(qp.max_queue_size());
      }
    }
  }
  GS_RETURN_IF_ERROR(NormaliseBatchingConfig(b));
  return b;
}

// One spec per instance of the resolved groups; INVALID_ARGUMENT unless there are
// 1..kMaxInstances.
absl::StatusOr<std::vector<InstanceSpec>> ExpandInstances(const std::vector<Group>& groups) {
  int64_t total = 0;
  for (const Group& g : groups) {
    total += int64_t{g.count()} * (g.kind() == Group::KIND_GPU ? g.gpus_size() : 1);
  }
  if (total < 1 || total > kMaxInstances) {
    return absl::InvalidArgumentError(absl::StrCat("model instances must be in 1..", kMaxInstances));
  }
  std::vector<InstanceSpec> out;
  for (const Group& g : groups) {
    const bool gpu = g.kind() == Group::KIND_GPU;
    const std::vector<int> devices =
        gpu ? std::vector<int>(g.gpus().begin(), g.gpus().end()) : std::vector<int>{0};
    for (int device : devices) {
      for (int i = 0; i < g.count(); ++i) {
        InstanceSpec spec;
        spec.kind = gpu ? InstanceSpec::Kind::kGpu : InstanceSpec::Kind::kCpu;
        spec.device = device;
        spec.name = absl::StrCat(g.name(), "_", out.size());
        out.push_back(std::move(spec));
      }
    }
  }
  return out;
}

// Whether `name` is a relative path of named components ("a.bin", "text/one.bin"), so that
// it stays below the directory it is joined to, symbolic links apart (the repository
// resolves those).
bool IsWarmUpFileName(absl::string_view name) {
  if (name.empty() || name.front() == '/' || name.size() > 4096) return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == "." || part == ".." || part.find('\0') != part.npos) return false;
  }
  return true;
}

// config.pbtxt's model_warmup samples, checked as far as they can be without the model
// (its input is checked when it loads: instance_warm_up.h).
absl::StatusOr<std::vector<::inference::ModelWarmup>> WarmUpSamples(
    const v1::ServingConfig& overrides, int max_batch_size) {
  std::vector<::inference::ModelWarmup> samples;
  for (const ::inference::ModelWarmup& w : overrides.model_warmup()) {
    const std::string which = absl::StrCat("model_warmup '", w.name(), "'");
    if (w.batch_size() < 1 || w.batch_size() > static_cast<uint32_t>(max_batch_size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, ": batch_size must be in 1..", max_batch_size, " (the model's max_batch_size)"));
    }
    if (w.count() > 1000) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": count must be at most 1000"));
    }
    if (w.inputs_size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, ": give the model's one input, not ", w.inputs_size()));
    }
    const auto& input = w.inputs().begin()->second;
    if (input.input_data_type_case() == ::inference::ModelWarmup::Input::kInputDataFile &&
        !IsWarmUpFileName(input.input_data_file())) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, ": input_data_file '", input.input_data_file(),
          "' must name a file below the model's warmup/ directory (a relative path, no '..')"));
    }
    if (input.input_data_type_case() == ::inference::ModelWarmup::Input::INPUT_DATA_TYPE_NOT_SET) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, ": its input needs zero_data, random_data or input_data_file"));
    }
    samples.push_back(w);
  }
  return samples;
}

}  // namespace

absl::StatusOr<ServingPlan> MakeServingPlan(const ServingDefaults& defaults,
                                            int model_max_batch_size,
                                            const v1::ServingConfig& overrides,
                                            const DeviceInventory& devices) {
  ServingPlan plan;
  GS_ASSIGN_OR_RETURN(plan.batching, MakeBatching(defaults, model_max_batch_size, overrides));
  GS_ASSIGN_OR_RETURN(plan.groups, ResolveGroups(defaults, overrides, devices));
  const bool cuda_graphs = overrides.optimization().has_cuda()
                               ? overrides.optimization().cuda().graphs()
                               : defaults.cuda_graphs;
  GS_ASSIGN_OR_RETURN(plan.instances, ExpandInstances(plan.groups));
  GS_ASSIGN_OR_RETURN(plan.warm_up, WarmUpSamples(overrides, plan.batching.max_batch_size));
  for (InstanceSpec& spec : plan.instances) {
    spec.cuda_graphs = spec.kind == InstanceSpec::Kind::kGpu && cuda_graphs;
    spec.max_batch_size = plan.batching.max_batch_size;
  }
  return plan;
}

}  // namespace gatescope
