#include "server/metrics/metrics_http_server.h"

#include "server/metrics/metrics_http_handler.h"

#include <prometheus/text_serializer.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gatescope {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

struct MetricsHttpServer::Impl {
  Impl(std::shared_ptr<prometheus::Registry> r, std::function<void()> b, const AccessControl* a)
      : endpoint{std::move(r), std::move(b), a} {}

  void Accept();

  std::atomic<int> connections{0};  // before `io`: sessions destroyed with it decrement it
  asio::io_context io{1};
  tcp::acceptor acceptor{io};  // after `io`: destroyed before it
  const MetricsEndpoint endpoint;
  std::thread thread;
  std::atomic<bool> stopped{false};
};

namespace {

template <typename Duration>
std::chrono::steady_clock::duration Chrono(Duration d) {
  return absl::ToChronoNanoseconds(d);
}

// One connection: read a request head (with a deadline), answer, repeat while keep-alive.
// Owned by the handlers in flight (shared_from_this); runs on the server's one thread.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, MetricsHttpServer::Impl* server)
      : stream_(std::move(socket)), server_(server) {}
  ~Session() { server_->connections.fetch_sub(1); }

  void Read() {
    parser_.emplace();
    LimitMetricsRequest(*parser_);
    stream_.expires_after(Chrono(MetricsHttpServer::kReadTimeout));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRead(ec);
                     });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted) {
      return Close();  // closed by the peer, too slow, or the server is stopping
    }
    if (ec) return Reply(BadRequest(), /*keep_alive=*/false);  // not HTTP, or too large
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
    stream_.expires_after(Chrono(MetricsHttpServer::kWriteTimeout));
    http::async_write(stream_, *response_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->Close();
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> response_;
  MetricsHttpServer::Impl* const server_;
};

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
      if (connections.fetch_add(1) < kMaxConnections) {
        std::make_shared<Session>(std::move(socket), this)->Read();
      } else {
        connections.fetch_sub(1);  // over the cap: closed at once (socket destructor)
      }
    }
    Accept();
  });
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
    std::function<void()> before_scrape, const AccessControl* access) {
  absl::StatusOr<asio::ip::address> address = ListenAddress(host);
  if (!address.ok()) return address.status();
  auto impl = std::make_unique<Impl>(std::move(registry), std::move(before_scrape), access);
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
    impl->io.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace gatescope
