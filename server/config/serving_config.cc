#include "server/config/serving_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty()) first = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  std::string first;
};

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

absl::StatusOr<ServingPlan> MakeServingPlan(const ServingDefaults& defaults,
                                            int model_max_batch_size,
                                            const v1::ServingConfig& overrides) {
  ServingPlan plan;
  DynamicBatchingConfig& b = plan.batching;
  b.max_batch_size = defaults.max_batch_size;
  if (model_max_batch_size > 0) b.max_batch_size = std::min(b.max_batch_size, model_max_batch_size);
  if (overrides.max_batch_size() > 0) b.max_batch_size = overrides.max_batch_size();
  b.max_queue_delay = defaults.max_queue_delay;
  b.queue_policy.max_queue_size = defaults.max_queue_size;
  plan.instances = defaults.instances;

  if (overrides.has_dynamic_batching()) {
    const auto& db = overrides.dynamic_batching();
    b.preferred_batch_sizes.assign(db.preferred_batch_size().begin(),
                                   db.preferred_batch_size().end());
    if (db.max_queue_delay_microseconds() > (uint64_t{1} << 40)) {
      return absl::InvalidArgumentError("max_queue_delay_microseconds must be below 2^40");
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
      const auto& qp = db.default_queue_policy();
      b.queue_policy.timeout_action = qp.timeout_action() == ::inference::ModelQueuePolicy::DELAY
                                          ? QueuePolicy::TimeoutAction::kDelay
                                          : QueuePolicy::TimeoutAction::kReject;
      if (qp.default_timeout_microseconds() > 0) {
        b.queue_policy.default_timeout = absl::Microseconds(qp.default_timeout_microseconds());
      }
      b.queue_policy.allow_timeout_override = qp.allow_timeout_override();
      if (qp.default_timeout_microseconds() > (uint64_t{1} << 40) ||
          db.max_queue_delay_microseconds() > (uint64_t{1} << 40)) {
        return absl::InvalidArgumentError("timeouts and delays must be below 2^40 microseconds");
      }
      if (qp.max_queue_size() > 0) {
        b.queue_policy.max_queue_size = static_cast<int>(qp.max_queue_size());
      }
    }
  }
  if (overrides.instance_group_size() > 0) {
    plan.instances = 0;
    for (const auto& g : overrides.instance_group()) {
      if (g.count() < 1) return absl::InvalidArgumentError("instance_group.count must be >= 1");
      if (g.kind() == ::inference::ModelInstanceGroup::KIND_GPU) {
        return absl::InvalidArgumentError("instance_group kind KIND_GPU: this server runs "
                                          "models on the CPU");
      }
      plan.instances += g.count();
    }
  }
  if (plan.instances < 1 || plan.instances > 64) {
    return absl::InvalidArgumentError("model instances must be in 1..64");
  }
  if (absl::Status st = NormaliseBatchingConfig(b); !st.ok()) return st;
  return plan;
}

}  // namespace gatescope
