#include "server/metrics/metrics_http_server.h"

#include "server/metrics/metrics_http_handler.h"

#include <prometheus/text_serializer.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gatescope {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// What Stop needs of a connection: closing its socket at once.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void Abort() = 0;
};

struct MetricsHttpServer::Impl {
  Impl(std::shared_ptr<prometheus::Registry> r, std::function<void()> b, const AccessControl* a)
      : endpoint{std::move(r), std::move(b), a} {}

  void Accept();

  std::atomic<int> connections{0};  // before `io`: sessions destroyed with it decrement it
  // The open connections, for Stop. Touched on the serving thread, or after it has ended
  // (sessions destroyed with `io`); before `io`, so it outlives them.
  std::set<Connection*> open;
  std::optional<ssl::context> tls;  // set: HTTPS; before `io`, which holds the sessions
  asio::io_context io{1};
  tcp::acceptor acceptor{io};  // after `io`: destroyed before it
  asio::steady_timer accept_retry{io};  // paces accepting after an error (EMFILE, ...)
  const MetricsEndpoint endpoint;
  std::thread thread;
  std::atomic<bool> stopped{false};
};

namespace {

template <typename Duration>
std::chrono::steady_clock::duration Chrono(Duration d) {
  return absl::ToChronoNanoseconds(d);
}

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One connection: (HTTPS: a TLS handshake, with a deadline) read a request head (with a
// deadline), answer, repeat while keep-alive. Owned by the handlers in flight
// (shared_from_this); runs on the server's one thread.
template <typename Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  template <typename... StreamArgs>
  explicit Session(MetricsHttpServer::Impl* server, StreamArgs&&... args)
      : stream_(std::forward<StreamArgs>(args)...), server_(server) {
    server_->open.insert(this);
  }
  ~Session() override {
    server_->open.erase(this);
    server_->connections.fetch_sub(1);
  }

  // Closes the socket now; pending operations end with operation_aborted.
  void Abort() override {
    beast::error_code ignored;
    Tcp().socket().close(ignored);
  }

  void Start() {
    if constexpr (kTls) {
      Tcp().expires_after(Chrono(MetricsHttpServer::kReadTimeout));
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (!ec) self->Read();  // else dropped: the socket closes
                              });
    } else {
      Read();
    }
  }

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void Read() {
    parser_.emplace();
    LimitMetricsRequest(*parser_);
    Tcp().expires_after(Chrono(MetricsHttpServer::kReadTimeout));
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRead(ec);
                     });
  }

  void OnRead(beast::error_code ec) {
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream) {
      return Reply(BadRequest(), /*keep_alive=*/false);  // not HTTP, or too large
    }
    // Closed by the peer, too slow, the server is stopping, or a TLS failure.
    if (ec) return Close();
    const http::request<http::empty_body>& request = parser_->get();
    http::response<http::string_body> response = AnswerMetricsRequest(request, server_->endpoint);
    Reply(std::move(response), request.keep_alive());
  }

  static http::response<http::string_body> BadRequest() {
    http::response<http::string_body> r{http::status::bad_request, 11};
    r.set(http::field::content_type, "text/plain");
    r.body() = "bad request\n";
    r.prepare_payload();
    return r;
  }

  void Reply(http::response<http::string_body> response, bool keep_alive) {
    response.keep_alive(keep_alive);
    response_ = std::make_shared<http::response<http::string_body>>(std::move(response));
    Tcp().expires_after(Chrono(MetricsHttpServer::kWriteTimeout));
    http::async_write(stream_, *response_,
                      [self = this->shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->Close();
                        self->Read();
                      });
  }

  // Ends the connection: HTTPS sends TLS close_notify first (within kWriteTimeout); the
  // socket itself closes when the last handler lets the session go.
  void Close() {
    if constexpr (kTls) {
      Tcp().expires_after(Chrono(MetricsHttpServer::kWriteTimeout));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
    } else {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> response_;
  MetricsHttpServer::Impl* const server_;
};

// An OpenSSL server context from `c`: TLS 1.2 or later; with a client CA, peers without a
// certificate it signed fail the handshake.
absl::StatusOr<ssl::context> TlsContext(const HttpsCredentials& c) {
  ssl::context context(ssl::context::tls_server);
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                      ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  beast::error_code ec;
  context.use_certificate_chain(asio::buffer(c.certificate_chain), ec);
  if (!ec) context.use_private_key(asio::buffer(c.private_key), ssl::context::pem, ec);
  if (!ec && !c.client_ca.empty()) {
    context.add_certificate_authority(asio::buffer(c.client_ca), ec);
    if (!ec) context.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics HTTPS: OpenSSL refuses the certificate, key or client CA: ",
                     ec.message()));
  }
  return context;
}

absl::StatusOr<asio::ip::address> ListenAddress(const std::string& host) {
  beast::error_code ec;
  const asio::ip::address address =
      asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host must be localhost or an IPv4/IPv6 literal: ", host));
  }
  return address;
}

}  // namespace

http::response<http::string_body> AnswerMetricsRequest(
    const http::request<http::empty_body>& request, const MetricsEndpoint& endpoint) {
  const int version = request.version();
  auto reply = [version](http::status status, std::string body) {
    http::response<http::string_body> r{status, version};
    r.set(http::field::content_type, "text/plain");
    r.body() = std::move(body);
    return r;
  };
  const absl::string_view target(request.target().data(), request.target().size());
  http::response<http::string_body> r;
  if (request.method() != http::verb::get) {
    r = reply(http::status::method_not_allowed, "GET only\n");
    r.set(http::field::allow, "GET");
  } else if (target != "/metrics" && !absl::StartsWith(target, "/metrics?")) {
    r = reply(http::status::not_found, "see /metrics\n");
  } else {
    absl::Status allowed = absl::OkStatus();
    if (endpoint.access != nullptr) {
      const auto header = request[http::field::authorization];
      allowed = endpoint.access->Check(absl::string_view(header.data(), header.size()), Access::kMetrics);
    }
    if (!allowed.ok()) {
      r = reply(http::status::unauthorized, absl::StrCat(allowed.message(), "\n"));
      r.set(http::field::www_authenticate, "Bearer realm=\"gatescope\"");
    } else {
      if (endpoint.before_scrape) endpoint.before_scrape();
      r = reply(http::status::ok, prometheus::TextSerializer().Serialize(endpoint.registry->Collect()));
      r.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    }
  }
  r.prepare_payload();
  return r;
}

void MetricsHttpServer::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      if (connections.fetch_add(1) >= kMaxConnections) {
        connections.fetch_sub(1);  // over the cap: closed at once (socket destructor)
      } else if (tls) {
        std::make_shared<Session<TlsStream>>(this, std::move(socket), *tls)->Start();
      } else {
        std::make_shared<Session<PlainStream>>(this, std::move(socket))->Start();
      }
    } else {
      // Out of descriptors or memory: accepting again at once would spin on the same error.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      return accept_retry.async_wait([this](beast::error_code wait) {
        if (!wait) Accept();
      });
    }
    Accept();
  });
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
    MetricsHttpOptions options) {
  absl::StatusOr<asio::ip::address> address = ListenAddress(host);
  if (!address.ok()) return address.status();
  auto impl = std::make_unique<Impl>(std::move(registry), std::move(options.before_scrape),
                                     options.access);
  if (options.https) {
    absl::StatusOr<ssl::context> tls = TlsContext(*options.https);
    if (!tls.ok()) return tls.status();
    impl->tls.emplace(*std::move(tls));
  }
  const tcp::endpoint endpoint(*address, static_cast<unsigned short>(port));
  beast::error_code ec;
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  // "::" takes IPv4 too, as gRPC's "[::]:port" does, whatever the system default.
  if (!ec && address->is_v6()) impl->acceptor.set_option(asio::ip::v6_only(false), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, " port ", port, ": ", ec.message()));
  }
  const int bound = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(impl), bound));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_retry.cancel();
    for (Connection* connection : impl->open) connection->Abort();
    impl->io.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace gatescope
