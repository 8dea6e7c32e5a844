#include "server/api/request_scheduling.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "server/config/batching_config.h"

namespace gatescope {
namespace {

constexpr int64_t kMaxTimeoutMicroseconds = int64_t{1} << 40;

// The integer parameter `name` of `request`, 0 when absent. Triton's clients send
// priority as a uint64_param and timeout as an int64_param; either kind is taken.
absl::StatusOr<int64_t> IntegerParameter(const ::inference::ModelInferRequest& request,
                                         const char* name) {
  auto it = request.parameters().find(name);
  if (it == request.parameters().end()) return 0;
  switch (it->second.parameter_choice_case()) {
    case ::inference::InferParameter::kInt64Param:
      return it->second.int64_param();
    case ::inference::InferParameter::kUint64Param:
      // Past int64's range is out of every accepted range: mapped to -1 to be refused.
      return it->second.uint64_param() > static_cast<uint64_t>(INT64_MAX)
                 ? int64_t{-1}
                 : static_cast<int64_t>(it->second.uint64_param());
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(name, " parameter must be an int64_param or a uint64_param"));
  }
}

}  // namespace

absl::StatusOr<Scheduling> MakeScheduling(int64_t priority, int64_t timeout_us) {
  if (priority < 0 || priority > kMaxPriorityLevels) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority ", priority, " out of range 0..", kMaxPriorityLevels));
  }
  if (timeout_us < 0 || timeout_us > kMaxTimeoutMicroseconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout ", timeout_us, " us out of range 0..2^40"));
  }
  return Scheduling{static_cast<int>(priority), absl::Microseconds(timeout_us)};
}

absl::StatusOr<Scheduling> SchedulingOf(const ::gatescope::v1::PredictRequest& request) {
  const uint64_t timeout = request.timeout_microseconds();
  return MakeScheduling(request.priority(),
                        timeout > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                            ? -1
                            : static_cast<int64_t>(timeout));
}

absl::StatusOr<Scheduling> SchedulingOf(const ::inference::ModelInferRequest& request) {
  auto priority = IntegerParameter(request, "priority");
  if (!priority.ok()) return priority.status();
  auto timeout = IntegerParameter(request, "timeout");
  if (!timeout.ok()) return timeout.status();
  return MakeScheduling(*priority, *timeout);
}

}  // namespace gatescope
