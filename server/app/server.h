// The whole server, started in-process: op library, model repository (with polling if
// asked), Prometheus /metrics, the gatescope.v1, KServe v2, health and reflection
// services on one gRPC port, and the KServe v2 REST API on its HTTP port. main.cc only
// turns flags into options and signals into Shutdown; tests start it with fakes.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/app/server_options.h"
#include "server/common/clock.h"
#include "server/runtime/model_loader.h"

namespace gatescope {

// Seams for tests; null members take the production default (TorchScript archives on the
// process's devices, real time).
struct ServerDeps {
  const ModelLoader* loader = nullptr;  // not owned; outlives the server
  const Clock* clock = nullptr;         // not owned; outlives the server
};

// The integer channel arguments the gRPC server is built with, by GRPC_ARG_* name:
// streams per connection, idle and keepalive limits, ping-abuse limits, and no
// SO_REUSEPORT. (The message size and the ResourceQuota are set on the builder directly.)
std::map<std::string, int> GrpcServerArguments(const ServerOptions& options);

class Server {
 public:
  // Validates `options` (INVALID_ARGUMENT), loads the op library (NOT_FOUND / INTERNAL),
  // loads the repository (NOT_FOUND when its root is missing; failing models are served
  // as not ready) and starts listening (UNAVAILABLE when a port cannot be bound). Blocks
  // while the models load.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       ServerDeps deps = {});
  // Shuts down (if not yet).
  ~Server();

  // The bound ports (metrics, http: -1 when disabled).
  int grpc_port() const;
  int metrics_port() const;
  int http_port() const;

  // Graceful drain: health reports NOT_SERVING, new inference calls get UNAVAILABLE,
  // polling stops, queued requests run at once, and gRPC calls in flight get up to
  // drain_timeout before gRPC cancels them; REST calls in flight are answered before the
  // HTTP port closes. Blocks until done. Idempotent; thread-safe.
  void Shutdown();

  // Blocks until Shutdown has completed.
  void Wait();

  struct State;

 private:
  explicit Server(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gatescope
