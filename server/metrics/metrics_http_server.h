// The HTTP endpoint serving GET /metrics in the Prometheus text format: an HttpServer
// (server/http/http_server.h; Boost.Beast, plain HTTP or HTTPS) answering with
// AnswerMetricsRequest. (The civetweb-based exposer of prometheus-cpp cannot start in a
// process that also loads libtorch_cpu.)
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/access_control.h"
#include "server/http/http_server.h"

namespace gatescope {

struct MetricsHttpOptions {
  std::function<void()> before_scrape;  // optional; runs on the serving thread before each
                                        // collection
  const AccessControl* access = nullptr;  // optional, not owned, outlives the server: who may
                                          // scrape (a refused scrape gets 401 with
                                          // WWW-Authenticate: Bearer)
  std::optional<HttpsCredentials> https;  // set: HTTPS only (TLS 1.2 or later)
};

class MetricsHttpServer {
 public:
  // A TLS handshake or a request must arrive within kReadTimeout, a response must be taken
  // within kWriteTimeout; at most kMaxConnections are open at once.
  static constexpr absl::Duration kReadTimeout = absl::Seconds(5);
  static constexpr absl::Duration kWriteTimeout = absl::Seconds(10);
  static constexpr int kMaxConnections = 256;

  // Listens on host:port ("localhost", an IPv4 or IPv6 literal; port 0 picks a free one).
  // `registry` is shared; collection is thread-safe in prometheus-cpp. INVALID_ARGUMENT for a
  // bad host or HTTPS credentials OpenSSL refuses, UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
      MetricsHttpOptions options = {});

  int port() const { return http_->port(); }
  // Closes the listener and every connection and joins the thread. Idempotent, blocking.
  void Stop() { http_->Stop(); }

 private:
  explicit MetricsHttpServer(std::unique_ptr<HttpServer> http) : http_(std::move(http)) {}
  std::unique_ptr<HttpServer> http_;
};

}  // namespace gatescope
