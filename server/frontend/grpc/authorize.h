// The gRPC side of access control: the call's "authorization" metadata checked against the
// server's AccessControl for the RPC's category.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "server/auth/access_control.h"

namespace gatescope {

// OK when `access` is null (control off) or allows `what` for the call's token; otherwise
// UNAUTHENTICATED or PERMISSION_DENIED (AccessControl::Check). Cheap; any thread.
absl::Status Authorize(const grpc::CallbackServerContext& context, const AccessControl* access,
                       Access what);

}  // namespace gatescope
