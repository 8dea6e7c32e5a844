// Everything gatescope-server is configured with. main.cc fills it from flags; tests fill
// it directly. Plain data.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/config/serving_config.h"

namespace gatescope {

inline constexpr char kAutoOpsLibrary[] = "auto";

struct ServerOptions {
  std::string model_repository = "model_repository";
  // Op library (.so) to load before any model; kAutoOpsLibrary: the one built beside the
  // running binary (../models/ops/libgatescope_ops.so), if there is one; empty: none.
  std::string ops_library;
  // If set, "grpc=<port> metrics=<port>" is written there (atomically) once serving.
  std::string port_file;
  std::string host = "127.0.0.1";
  int grpc_port = 8001;     // 0 picks a free port
  int metrics_port = 8002;  // 0 picks a free port; -1 disables /metrics
  int torch_threads = 0;    // intra-op threads for Torch; 0: all cores
  ServingDefaults defaults;  // per model, unless its config.pbtxt says otherwise
  enum class ModelControl { kNone, kExplicit, kPoll };
  ModelControl model_control = ModelControl::kNone;
  absl::Duration repository_poll_interval = absl::Seconds(15);  // with kPoll
  absl::Duration drain_timeout = absl::Seconds(10);  // Shutdown: time for calls in flight
  int64_t explain_max_bytes = int64_t{256} << 20;    // per explain request
  int max_message_bytes = 16 << 20;                  // largest request accepted
};

// INVALID_ARGUMENT naming the first option out of range (ports 0..65535, metrics -1 too;
// threads >= 0; batch size 1..4096; queue size >= 1; delay and timeouts >= 0; instances
// 1..64; poll interval > 0; explain cap > 0; message size 1 KiB..1 GiB).
absl::Status ValidateServerOptions(const ServerOptions& options);

}  // namespace gatescope
