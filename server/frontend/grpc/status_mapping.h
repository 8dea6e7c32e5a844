// The single mapping from absl::Status to grpc::Status.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace gatescope {

// Codes map one to one (both follow google.rpc.Code); the message is kept.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Upper-case code name used as the metrics label, e.g. "INVALID_ARGUMENT".
std::string StatusCodeName(absl::StatusCode code);

}  // namespace gatescope
