// An HTTP/1.1 server on Boost.Beast (Debian's libboost-dev, header-only; the maintained
// Asio-based HTTP library, already the one the project uses, so no second HTTP stack), over
// plain HTTP or HTTPS (Asio's OpenSSL stream). Serves /metrics and the KServe v2 REST API.
//
// Connections are served asynchronously on one owned thread, so a slow or silent peer holds
// only its own connection: a TLS handshake and a whole request must arrive within
// `request_timeout`, a response must be taken within `write_timeout`, and at most
// `max_connections` are open at once (more are closed on accept). Keep-alive is honoured;
// "Expect: 100-continue" is answered before the body is read. A request is handed to the
// handler, which answers through its Respond, at once or later from any thread; the
// connection reads its next request only after the answer is written. The answer to a HEAD
// request is sent without its body (its Content-Length is the body's size). Accepted
// connections have TCP_NODELAY set: answers are written whole and never wait for an ACK.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/beast/http.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gatescope {

namespace http = boost::beast::http;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;

// PEM text (not file names) for HTTPS: the server's certificate chain and private key; with
// client_ca as well, a client must present a certificate one of its CAs signed (mutual TLS).
struct HttpsCredentials {
  std::string certificate_chain;
  std::string private_key;
  std::string client_ca;  // empty: no client certificate asked for
};

// Answers one request: call once, from any thread; copies share one answer (calls after the
// first are ignored, and if every copy is destroyed unanswered the client gets 500). The
// response's keep-alive and payload size are set by the server.
using HttpRespond = std::function<void(HttpResponse)>;
// Called on the server's thread for each request read; must not block (hand long work to
// another thread and respond from there).
using HttpHandler = std::function<void(HttpRequest request, HttpRespond respond)>;

struct HttpServerOptions {
  std::string name = "HTTP";  // in error messages, e.g. "metrics"
  std::optional<HttpsCredentials> https;  // set: HTTPS only (TLS 1.2 or later)
  uint64_t body_limit = 0;                // larger bodies: 413
  uint32_t header_limit = 8192;           // larger heads: 431
  absl::Duration request_timeout = absl::Seconds(5);
  absl::Duration write_timeout = absl::Seconds(10);
  int max_connections = 256;
  // Optional: looks at a request's head before its body is read; a response it returns is
  // sent at once and the connection closed (e.g. 401 for a missing token, so an
  // unauthenticated peer never makes the server hold a body). Runs on the server's thread.
  std::function<std::optional<HttpResponse>(const HttpRequest& head)> check_head;
  // Bytes of request bodies held at once over every connection (0: no bound). A request
  // whose declared body (body_limit when chunked) would go over it gets 503 before its body
  // is read; its share is released once its answer is written.
  uint64_t memory_bytes = 0;
};

class HttpServer {
 public:
  // Listens on host:port ("localhost", an IPv4 or IPv6 literal; port 0 picks a free one).
  // INVALID_ARGUMENT for a bad host or HTTPS credentials OpenSSL refuses, UNAVAILABLE when
  // the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                           HttpHandler handler,
                                                           HttpServerOptions options = {});
  ~HttpServer();  // Stop()

  int port() const { return port_; }

  // Stops accepting, waits until every request handed to the handler has been answered
  // and its answer written (or its connection has failed), then closes every connection
  // and joins the thread. Idempotent, blocking.
  void Stop();

  struct Impl;

 private:
  HttpServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  const int port_;
};

}  // namespace gatescope
