#include "client/perf/rest_client.h"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <optional>

#include "client/connection.h"

namespace gatescope::perf {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr uint64_t kMaxAnswerBytes = 256ull << 20;  // as gatescope-client's gRPC channels

// HOST and PORT of "HOST:PORT" or "[V6]:PORT" (the host unbracketed); nullopt without a
// host or port, or for an IPv6 literal without brackets.
std::optional<std::pair<std::string, std::string>> SplitAddress(const std::string& address) {
  std::string host, port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find("]:");
    if (close == std::string::npos) return std::nullopt;
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.find(':');
    if (colon == std::string::npos || address.find(':', colon + 1) != std::string::npos) {
      return std::nullopt;
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  if (host.empty() || port.empty()) return std::nullopt;
  return std::make_pair(host, port);
}

// Whether `host` is an IPv4 or IPv6 literal rather than a name.
bool IsAddressLiteral(const std::string& host) {
  beast::error_code ec;
  net::ip::make_address(host, ec);
  return !ec;
}

// Whether a failure of a request on a connection that has answered before means the server
// closed it while it was idle: nothing of an answer arrived and the connection ended.
// Only then is the request sent again (anything else could have run it already).
bool ClosedWhileIdle(const beast::error_code& ec, bool got_some) {
  return !got_some && (ec == http::error::end_of_stream || ec == net::error::eof ||
                       ec == net::error::connection_reset || ec == net::error::broken_pipe ||
                       ec == ssl::error::stream_truncated);
}

absl::StatusOr<std::shared_ptr<ssl::context>> TlsContext(
    const client::ConnectionOptions& options) {
  absl::StatusOr<grpc::SslCredentialsOptions> pem = client::ReadTlsFiles(options);
  if (!pem.ok()) return pem.status();
  auto tls = std::make_shared<ssl::context>(ssl::context::tls_client);
  tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  beast::error_code ec;
  tls->add_certificate_authority(net::buffer(pem->pem_root_certs), ec);
  if (ec) return absl::InvalidArgumentError("--tls-ca: " + ec.message());
  tls->set_verify_mode(ssl::verify_peer, ec);
  if (!pem->pem_cert_chain.empty()) {
    tls->use_certificate_chain(net::buffer(pem->pem_cert_chain), ec);
    if (ec) return absl::InvalidArgumentError("--tls-cert: " + ec.message());
    tls->use_private_key(net::buffer(pem->pem_private_key), ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError("--tls-key: " + ec.message());
  }
  return tls;
}

// A transport failure: DEADLINE_EXCEEDED when the call's time ran out, else UNAVAILABLE.
absl::Status Failure(const beast::error_code& ec, const std::string& what) {
  if (ec == beast::error::timeout) return absl::DeadlineExceededError(what + ": timed out");
  return absl::UnavailableError(what + ": " + ec.message());
}

// Runs the asynchronous operation `start` begins to its end on `ioc`; its error.
template <typename Start>
beast::error_code RunToEnd(net::io_context& ioc, Start start) {
  beast::error_code result;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

}  // namespace

absl::StatusOr<RestEndpoint> OpenRestEndpoint(const client::ConnectionOptions& options) {
  if (absl::Status st = client::CheckConnectionOptions(options); !st.ok()) return st;
  std::optional<std::pair<std::string, std::string>> address = SplitAddress(options.server);
  if (!address) {
    return absl::InvalidArgumentError("--server '" + options.server +
                                      "' is not HOST:PORT of the REST API");
  }
  RestEndpoint endpoint;
  std::tie(endpoint.host, endpoint.port) = *std::move(address);
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  endpoint.authority =
      (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + endpoint.port;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token = client::ReadTokenFile(options.token_file);
    if (!token.ok()) return token.status();
    endpoint.token = *std::move(token);
  }
  if (!options.tls_ca.empty()) {
    absl::StatusOr<std::shared_ptr<ssl::context>> tls = TlsContext(options);
    if (!tls.ok()) return tls.status();
    endpoint.tls = *std::move(tls);
    endpoint.server_name = options.tls_server_name.empty() ? endpoint.host
                                                           : options.tls_server_name;
  }
  return endpoint;
}

// Owned by one RestClient; `plain` or `secure` is set.
struct RestClient::Connection {
  net::io_context ioc;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;
  bool answered = false;  // a request has been answered on it: a later failure may be a close

  beast::tcp_stream& tcp() { return plain ? *plain : beast::get_lowest_layer(*secure); }

  // Calls f with the stream requests go over.
  template <typename F>
  auto WithStream(F f) {
    return plain ? f(*plain) : f(*secure);
  }
};

RestClient::RestClient(const RestEndpoint& endpoint) : endpoint_(endpoint) {}
RestClient::~RestClient() = default;

absl::StatusOr<RestReply> RestClient::Call(
    http::verb verb, const std::string& target, std::string body,
    const std::vector<std::pair<std::string, std::string>>& headers, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  http::request<http::string_body> request{verb, target, 11};
  request.set(http::field::host, endpoint_.authority);
  request.keep_alive(true);
  if (!endpoint_.token.empty()) {
    request.set(http::field::authorization, client::AuthorizationMetadata(endpoint_.token).second);
  }
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = std::move(body);
  request.prepare_payload();
  for (int attempt = 0;; ++attempt) {
    if (connection_ == nullptr) {
      auto c = std::make_unique<Connection>();
      if (endpoint_.tls) {
        c->secure.emplace(c->ioc, *endpoint_.tls);
      } else {
        c->plain.emplace(c->ioc);
      }
      beast::error_code ec;
      const tcp::resolver::results_type addresses =
          tcp::resolver(c->ioc).resolve(endpoint_.host, endpoint_.port, ec);
      if (ec) return Failure(ec, "resolving " + endpoint_.host);
      c->tcp().expires_at(deadline);
      ec = RunToEnd(c->ioc, [&](auto done) { c->tcp().async_connect(addresses, done); });
      if (ec) return Failure(ec, "connecting to " + endpoint_.authority);
      // A request may go out as several writes (TLS records); none should wait for an ACK.
      beast::error_code ignored;
      c->tcp().socket().set_option(tcp::no_delay(true), ignored);
      if (c->secure) {
        // SNI names a host; an address literal is not sent (RFC 6066), only verified.
        if (!IsAddressLiteral(endpoint_.server_name) &&
            SSL_set_tlsext_host_name(c->secure->native_handle(),
                                     endpoint_.server_name.c_str()) != 1) {
          return absl::InvalidArgumentError("TLS server name '" + endpoint_.server_name +
                                            "' cannot be sent");
        }
        c->secure->set_verify_callback(ssl::host_name_verification(endpoint_.server_name));
        ec = RunToEnd(c->ioc, [&](auto done) {
          c->secure->async_handshake(ssl::stream_base::client, done);
        });
        if (ec) return Failure(ec, "TLS handshake with " + endpoint_.server_name);
      }
      connection_ = std::move(c);
    }
    Connection& c = *connection_;
    c.tcp().expires_at(deadline);
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxAnswerBytes);
    beast::error_code ec = c.WithStream([&](auto& stream) {
      beast::error_code written = RunToEnd(
          c.ioc, [&](auto done) { http::async_write(stream, request, done); });
      if (written) return written;
      return RunToEnd(c.ioc, [&](auto done) { http::async_read(stream, c.buffer, parser, done); });
    });
    if (ec) {
      const bool closed_while_idle =
          c.answered && attempt == 0 && ClosedWhileIdle(ec, parser.got_some());
      connection_.reset();
      if (closed_while_idle) continue;  // once more, on a new connection
      return Failure(ec, "REST " + std::string(http::to_string(verb)) + " " + target);
    }
    c.answered = true;
    http::response<http::string_body> response = parser.release();
    RestReply reply;
    reply.status = static_cast<int>(response.result_int());
    reply.body = std::move(response.body());
    if (!response.keep_alive()) connection_.reset();
    return reply;
  }
}

absl::StatusCode StatusCodeOfHttp(int http_status) {
  switch (http_status) {
    case 200: return absl::StatusCode::kOk;
    case 400: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 409: return absl::StatusCode::kAborted;
    case 413:
    case 429:
    case 431: return absl::StatusCode::kResourceExhausted;
    case 405:  // the server's answer to a wrong method carries UNIMPLEMENTED
    case 501: return absl::StatusCode::kUnimplemented;
    case 503: return absl::StatusCode::kUnavailable;
    case 504: return absl::StatusCode::kDeadlineExceeded;
    default:
      return http_status >= 500 && http_status < 600 ? absl::StatusCode::kInternal
                                                     : absl::StatusCode::kUnknown;
  }
}

}  // namespace gatescope::perf
