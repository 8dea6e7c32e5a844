// Checks made before gRPC binds --grpc_unix_socket. gRPC removes whatever socket file is
// at the path before it binds (and again at shutdown) without asking whether a process
// still listens there, so a second server, or a restart that overlaps the old process,
// would silently take a live socket over. Blocking: one connect() on a local socket.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gatescope {

// OK when gRPC may bind `path`: nothing is there, or a socket no process listens on (left
// by a process that did not shut down). UNAVAILABLE naming unix:<path> when its directory
// does not exist, something other than a socket is there, or a process accepts
// connections on it. A process that starts listening after this check is not seen.
absl::Status CheckUnixSocketPathFree(const std::string& path);

}  // namespace gatescope
