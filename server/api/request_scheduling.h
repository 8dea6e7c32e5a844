// How a request asks to be scheduled, read and checked in one place for both APIs:
// gatescope.v1 PredictRequest.priority / timeout_microseconds and Triton's KServe request
// parameters "priority" / "timeout" (int64, microseconds).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gatescope/v1/inference.pb.h"
#include "inference/grpc_service.pb.h"

namespace gatescope {

struct Scheduling {
  int priority = 0;                                // 1 = highest; 0: the model's default
  absl::Duration timeout = absl::ZeroDuration();  // queue timeout; zero: the model's
};

// INVALID_ARGUMENT unless 0 <= priority <= kMaxPriorityLevels (whether the model has that
// many levels is the queue's check) and 0 <= timeout_us <= 2^40.
absl::StatusOr<Scheduling> MakeScheduling(int64_t priority, int64_t timeout_us);

absl::StatusOr<Scheduling> SchedulingOf(const ::gatescope::v1::PredictRequest& request);

// Also INVALID_ARGUMENT when either parameter is not an int64_param.
absl::StatusOr<Scheduling> SchedulingOf(const ::inference::ModelInferRequest& request);

}  // namespace gatescope
