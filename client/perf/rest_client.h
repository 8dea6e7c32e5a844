// gatescope-perf's client of the KServe v2 REST API: HTTP/1.1 over one kept-alive
// connection, HTTPS when the connection options name --tls-ca. On Boost.Beast, the HTTP
// library the server already uses (Debian's libboost-dev, header-only, with Asio's OpenSSL
// stream), so the project keeps one HTTP stack.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/verb.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/options.h"

namespace gatescope::perf {

// Where the REST API is and what every request carries. Immutable once opened; shared by
// every sending thread's RestClient.
struct RestEndpoint {
  std::string host, port;
  std::string authority;  // HOST:PORT as a URL and the Host header write it (IPv6 in brackets)
  std::string token;                                 // empty: no authorization header
  std::shared_ptr<boost::asio::ssl::context> tls;    // null: plain HTTP
  std::string server_name;  // with tls: checked against the certificate, sent as SNI
};

// The endpoint at options.server ("HOST:PORT", an IPv6 literal in brackets), with its TLS
// files and token read. INVALID_ARGUMENT with a one-line reason when the address lacks a
// host or port (or brackets around IPv6), the options do not fit together, or a file
// cannot be read or is refused by OpenSSL.
absl::StatusOr<RestEndpoint> OpenRestEndpoint(const client::ConnectionOptions& options);

struct RestReply {
  int status = 0;  // HTTP status code
  std::string body;
};

// One connection to the endpoint, opened at the first call and kept alive between calls.
// Not thread-safe: one per sending thread. Every call blocks.
class RestClient {
 public:
  explicit RestClient(const RestEndpoint& endpoint);  // `endpoint` must outlive it
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  // Sends one request (with the endpoint's token) and reads its answer; connecting, the TLS
  // handshake, sending and reading share timeout_ms (resolving the host's name, done first,
  // does not count). A kept-alive connection the server closed while idle (the connection
  // ended before any byte of the answer) is opened again and the request sent once more;
  // any other failure closes the connection (the next call opens a new one) and is
  // UNAVAILABLE, or DEADLINE_EXCEEDED when timeout_ms ran out.
  absl::StatusOr<RestReply> Call(boost::beast::http::verb verb, const std::string& target,
                                 std::string body,
                                 const std::vector<std::pair<std::string, std::string>>& headers,
                                 int timeout_ms);

 private:
  struct Connection;
  const RestEndpoint& endpoint_;
  std::unique_ptr<Connection> connection_;  // null until the first call, or after a failure
};

// The status the server's REST API answers with `http_status` for (the inverse of its
// mapping of codes to HTTP statuses): 200 OK, 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED,
// 403 PERMISSION_DENIED, 404 NOT_FOUND, 405 (a wrong method) and 501 UNIMPLEMENTED, 409
// ABORTED, 413, 429 and 431 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED, any
// other 5xx INTERNAL, anything else UNKNOWN.
absl::StatusCode StatusCodeOfHttp(int http_status);

}  // namespace gatescope::perf
