// A small HTTP/1.1 endpoint serving GET /metrics in the Prometheus text format.
// (The civetweb-based exposer cannot start in a process that also loads libtorch_cpu.)
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "server/auth/access_control.h"

namespace gatescope {

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0 picks a free one) and serves from one owned thread.
  // `registry` is shared; collection is thread-safe in prometheus-cpp. `before_scrape`
  // (optional) runs on the serving thread before each collection. `access` (optional, not
  // owned, outlives the server) decides who may scrape: a refused scrape gets 401 with
  // WWW-Authenticate: Bearer.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
      std::function<void()> before_scrape = nullptr, const AccessControl* access = nullptr);
  ~MetricsHttpServer();

  int port() const { return port_; }
  // Stops accepting and joins the thread (within ~200 ms). Idempotent.
  void Stop();

 private:
  MetricsHttpServer(int fd, int port, std::shared_ptr<prometheus::Registry> registry,
                    std::function<void()> before_scrape, const AccessControl* access);
  void Serve();
  void HandleConnection(int conn);

  const int listen_fd_;
  const int port_;
  std::shared_ptr<prometheus::Registry> registry_;
  const std::function<void()> before_scrape_;
  const AccessControl* const access_;  // may be null: open
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gatescope
