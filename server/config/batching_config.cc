#include "server/config/batching_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gatescope {

absl::Status NormaliseBatchingConfig(DynamicBatchingConfig& config) {
  if (config.max_batch_size < 1) {
    return absl::InvalidArgumentError("max_batch_size must be >= 1");
  }
  std::sort(config.preferred_batch_sizes.begin(), config.preferred_batch_sizes.end());
  config.preferred_batch_sizes.erase(
      std::unique(config.preferred_batch_sizes.begin(), config.preferred_batch_sizes.end()),
      config.preferred_batch_sizes.end());
  for (int p : config.preferred_batch_sizes) {
    if (p < 1 || p > config.max_batch_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "preferred_batch_size ", p, " must be in 1..max_batch_size (", config.max_batch_size,
          ")"));
    }
  }
  if (config.max_queue_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_queue_delay_microseconds must be >= 0");
  }
  if (config.idle_poll < absl::ZeroDuration() || config.idle_poll > kMaxIdlePoll) {
    return absl::InvalidArgumentError(
        absl::StrCat("the idle poll must be in 0..", absl::FormatDuration(kMaxIdlePoll)));
  }
  if (config.priority_levels > kMaxPriorityLevels) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority_levels must be at most ", kMaxPriorityLevels));
  }
  if (config.priority_levels < 0 ||
      config.default_priority_level < 0 ||
      config.default_priority_level > std::max(1, config.priority_levels) ||
      (config.priority_levels > 0 && config.default_priority_level == 0)) {
    return absl::InvalidArgumentError(
        "default_priority_level must be in 1..priority_levels when priority_levels is set");
  }
  if (config.queue_policy.max_queue_size < 0) {
    return absl::InvalidArgumentError("max_queue_size must be >= 0");
  }
  if (config.queue_policy.default_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("default_timeout must be positive (or infinite)");
  }
  return absl::OkStatus();
}

int QueueCapacity(const DynamicBatchingConfig& config) {
  return config.queue_policy.max_queue_size * std::max(1, config.priority_levels);
}

}  // namespace gatescope
