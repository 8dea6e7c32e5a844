// The HTTP endpoint serving GET /metrics in the Prometheus text format, on Boost.Beast
// (Debian's libboost-dev, header-only), over plain HTTP or HTTPS (Asio's OpenSSL stream).
// Connections are served asynchronously on one owned thread, so a slow or silent peer holds
// only its own connection: every step has a deadline (a TLS handshake or a request head must
// arrive within kReadTimeout, a response must be taken within kWriteTimeout) and at most
// kMaxConnections are open at once (more are closed on accept). Keep-alive is honoured.
// (The civetweb-based exposer of prometheus-cpp cannot start in a process that also loads
// libtorch_cpu.)
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/access_control.h"

namespace gatescope {

// PEM text (not file names) for HTTPS: the server's certificate chain and private key; with
// client_ca as well, a client must present a certificate one of its CAs signed (mutual TLS).
struct HttpsCredentials {
  std::string certificate_chain;
  std::string private_key;
  std::string client_ca;  // empty: no client certificate asked for
};

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
  static constexpr absl::Duration kReadTimeout = absl::Seconds(5);
  static constexpr absl::Duration kWriteTimeout = absl::Seconds(10);
  static constexpr int kMaxConnections = 256;

  // Listens on host:port ("localhost", an IPv4 or IPv6 literal; port 0 picks a free one).
  // `registry` is shared; collection is thread-safe in prometheus-cpp. INVALID_ARGUMENT for a
  // bad host or HTTPS credentials OpenSSL refuses, UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
      MetricsHttpOptions options = {});
  ~MetricsHttpServer();  // Stop()

  int port() const { return port_; }
  // Closes the listener and every connection and joins the thread. Idempotent, blocking.
  void Stop();

  struct Impl;

 private:
  MetricsHttpServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  const int port_;
};

}  // namespace gatescope
