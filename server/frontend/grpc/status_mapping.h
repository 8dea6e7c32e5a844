// The single mapping from absl::Status to grpc::Status.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "server/frontend/core/status_names.h"  // StatusCodeName, for the services' metrics

namespace gatescope {

// Codes map one to one (both follow google.rpc.Code); the message is kept.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace gatescope
