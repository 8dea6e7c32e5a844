#include "server/http/http_server.h"

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>

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

struct HttpServer::Impl {
  Impl(HttpHandler h, HttpServerOptions o) : handler(std::move(h)), options(std::move(o)) {}

  void Accept();
  // A request is handed to the handler (false once Stop has begun) / its answer is
  // written (or failed).
  bool TryBeginRequest() {
    std::lock_guard<std::mutex> lock(busy_mu);
    if (stopping) return false;
    ++busy;
    return true;
  }
  void EndRequest() {
    std::lock_guard<std::mutex> lock(busy_mu);
    if (--busy == 0) idle.notify_all();
  }
  // Takes `bytes` of the body budget (options.memory_bytes); false when it would go over.
  bool Reserve(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(busy_mu);
    if (options.memory_bytes > 0 && body_bytes + bytes > options.memory_bytes) return false;
    body_bytes += bytes;
    return true;
  }
  void Release(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(busy_mu);
    body_bytes -= bytes;
  }

  const HttpHandler handler;
  const HttpServerOptions options;
  std::atomic<int> connections{0};  // before `io`: sessions destroyed with it decrement it
  // The open connections, for Stop. Touched on the serving thread, or after it has ended
  // (sessions destroyed with `io`); before `io`, so it outlives them.
  std::set<Connection*> open;
  std::mutex busy_mu;
  std::condition_variable idle;
  int busy = 0;  // requests handed to the handler and not yet answered on the wire
  bool stopping = false;  // under busy_mu: Stop has begun, no new request is handed on
  uint64_t body_bytes = 0;  // under busy_mu: bodies reserved (Reserve)
  std::optional<ssl::context> tls;  // set: HTTPS; before `io`, which holds the sessions
  asio::io_context io{1};
  // Keeps `io` running while answers are owed with no operation pending (Stop releases it).
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  tcp::acceptor acceptor{io};  // after `io`: destroyed before it
  asio::steady_timer accept_retry{io};  // paces accepting after an error (EMFILE, ...)
  std::thread thread;
  std::atomic<bool> stopped{false};
};

namespace {

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

HttpResponse PlainAnswer(http::status status, unsigned version, std::string body) {
  HttpResponse r{status, version};
  r.set(http::field::content_type, "text/plain");
  r.body() = std::move(body);
  return r;
}

// One connection: (HTTPS: a TLS handshake) read a request head, answer 100-continue if
// asked, read the body, hand the request to the handler, write its answer, repeat while
// keep-alive. Owned by the operations in flight and by an unanswered Respond
// (shared_from_this); runs on the server's one thread.
template <typename Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  template <typename... StreamArgs>
  explicit Session(HttpServer::Impl* server, StreamArgs&&... args)
      : stream_(std::forward<StreamArgs>(args)...), server_(server) {
    server_->open.insert(this);
  }
  ~Session() override {
    ReleaseBody();
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
      Tcp().expires_after(Chrono(server_->options.request_timeout));
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (!ec) self->ReadHead();  // else dropped: the socket closes
                              });
    } else {
      ReadHead();
    }
  }

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void ReadHead() {
    parser_.emplace();
    parser_->header_limit(server_->options.header_limit);
    parser_->body_limit(server_->options.body_limit);
    Tcp().expires_after(Chrono(server_->options.request_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHead(ec);
                            });
  }

  void OnHead(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const HttpRequest& head = parser_->get();
    if (server_->options.check_head) {
      if (std::optional<HttpResponse> refused = server_->options.check_head(head)) {
        return Reply(std::move(*refused), /*keep_alive=*/false, /*counted=*/false,
                     /*head_only=*/head.method() == http::verb::head);
      }
    }
    if (!parser_->is_done()) {  // a body follows
      const uint64_t declared = parser_->content_length().value_or(server_->options.body_limit);
      if (declared > server_->options.body_limit) {
        return Reply(TooLarge(head.version()), false, false);
      }
      if (!server_->Reserve(declared)) {
        return Reply(PlainAnswer(http::status::service_unavailable, head.version(),
                                 "too many request bytes in flight; retry later\n"),
                     false, false);
      }
      reserved_ = declared;
      if (beast::iequals(head[http::field::expect], "100-continue")) {
        continue_.emplace(http::status::continue_, head.version());
        return http::async_write(stream_, *continue_,
                                 [self = this->shared_from_this()](beast::error_code ec, size_t) {
                                   if (ec) return self->Close();
                                   self->ReadBody();
                                 });
      }
    }
    ReadBody();
  }

  HttpResponse TooLarge(unsigned version) const {
    return PlainAnswer(http::status::payload_too_large, version,
                       absl::StrCat("request body over ", server_->options.body_limit, " bytes\n"));
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->OnReadError(ec);
                       self->Handle();
                     });
  }

  void OnReadError(beast::error_code ec) {
    const unsigned version = parser_->get().version() ? parser_->get().version() : 11;
    if (ec == http::error::body_limit) return Reply(TooLarge(version), false, false);
    if (ec == http::error::header_limit) {
      return Reply(PlainAnswer(http::status::request_header_fields_too_large, version,
                               "request head too large\n"),
                   false, false);
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Reply(PlainAnswer(http::status::bad_request, version, "bad request\n"), false,
                   false);
    }
    Close();  // closed by the peer, too slow, the server is stopping, or a TLS failure
  }

  // The one answer a request's Respond copies share (HttpRespond's contract): the first
  // call posts the reply to the server's thread, which then owns the session; if no copy
  // ever answers, the last one to go answers 500.
  struct PendingAnswer {
    PendingAnswer(std::shared_ptr<Session> s, bool keep, unsigned v, bool head)
        : session(std::move(s)), keep_alive(keep), version(v), head_only(head) {}
    ~PendingAnswer() {
      if (session) {
        Answer(PlainAnswer(http::status::internal_server_error, version,
                           "the request was dropped without an answer\n"));
      }
    }
    void Answer(HttpResponse r) {
      std::shared_ptr<Session> s;
      {
        std::lock_guard<std::mutex> lock(mu);
        s = std::move(session);
      }
      if (!s) return;  // answered already
      HttpServer::Impl* server = s->server_;
      asio::post(server->io, [s = std::move(s), r = std::move(r), keep = keep_alive,
                              head = head_only]() mutable {
        s->Reply(std::move(r), keep, /*counted=*/true, head);
      });
    }
    std::mutex mu;
    std::shared_ptr<Session> session;  // until answered
    const bool keep_alive;
    const unsigned version;
    const bool head_only;  // a HEAD request: the answer's head only
  };

  void Handle() {
    HttpRequest request = parser_->release();
    if (!server_->TryBeginRequest()) {  // draining: no new work on kept-alive connections
      return Reply(PlainAnswer(http::status::service_unavailable, request.version(),
                               "server is shutting down\n"),
                   false, false);
    }
    Tcp().expires_never();  // the handler may take its time; the write has its own deadline
    auto pending = std::make_shared<PendingAnswer>(this->shared_from_this(),
                                                   request.keep_alive(), request.version(),
                                                   request.method() == http::verb::head);
    HttpRespond respond = [pending](HttpResponse r) { pending->Answer(std::move(r)); };
    try {
      server_->handler(std::move(request), std::move(respond));
    } catch (...) {
      // Its Respond copies are gone with the exception, unanswered: PendingAnswer answers
      // 500 once the last one is destroyed.
    }
  }

  void ReleaseBody() {
    if (reserved_ > 0) server_->Release(reserved_);
    reserved_ = 0;
  }

  // Writes `response`; `counted`: it answers a request handed to the handler. `head_only`
  // (a HEAD request): its head only, whose Content-Length still gives the body's size.
  void Reply(HttpResponse response, bool keep_alive, bool counted, bool head_only = false) {
    response.keep_alive(keep_alive);
    response.prepare_payload();
    if (head_only) response.body().clear();
    response_ = std::make_shared<HttpResponse>(std::move(response));
    Tcp().expires_after(Chrono(server_->options.write_timeout));
    http::async_write(stream_, *response_,
                      [self = this->shared_from_this(), keep_alive, counted](beast::error_code ec,
                                                                             size_t) {
                        self->ReleaseBody();
                        if (counted) self->server_->EndRequest();
                        if (ec || !keep_alive) return self->Close();
                        self->ReadHead();
                      });
  }

  // Ends the connection: HTTPS sends TLS close_notify first (within write_timeout); plain
  // HTTP stops sending, then reads and drops what the peer still sends for up to a second,
  // so that an answer given before a body was read (413) is not lost to a reset. The
  // socket itself closes when the last handler lets the session go.
  void Close() {
    if constexpr (kTls) {
      Tcp().expires_after(Chrono(server_->options.write_timeout));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
    } else {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      Tcp().expires_after(std::chrono::seconds(1));
      Discard();
    }
  }

  void Discard() {
    stream_.async_read_some(asio::buffer(discard_),
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              if (!ec) self->Discard();
                            });
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  std::shared_ptr<HttpResponse> response_;
  std::array<char, 4096> discard_;
  uint64_t reserved_ = 0;  // this request's share of options.memory_bytes
  HttpServer::Impl* const server_;
};

// An OpenSSL server context from `c`: TLS 1.2 or later; with a client CA, peers without a
// certificate it signed fail the handshake.
absl::StatusOr<ssl::context> TlsContext(const HttpsCredentials& c, const std::string& name) {
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
    return absl::InvalidArgumentError(absl::StrCat(
        name, " HTTPS: OpenSSL refuses the certificate, key or client CA: ", ec.message()));
  }
  return context;
}

absl::StatusOr<asio::ip::address> ListenAddress(const std::string& host,
                                                const std::string& name) {
  beast::error_code ec;
  const asio::ip::address address =
      asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " host must be localhost or an IPv4/IPv6 literal: ", host));
  }
  return address;
}

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      // Each answer is written whole, so Nagle's algorithm only delays: over TLS a new
      // connection's first answer otherwise waits behind the unacknowledged session tickets
      // for the client's delayed ACK (about 40 ms per new HTTPS connection, measured with
      // benchmarks/bench_python_client.py).
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      if (connections.fetch_add(1) >= options.max_connections) {
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

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port,
                                                               HttpHandler handler,
                                                               HttpServerOptions options) {
  absl::StatusOr<asio::ip::address> address = ListenAddress(host, options.name);
  if (!address.ok()) return address.status();
  auto impl = std::make_unique<Impl>(std::move(handler), options);
  if (options.https) {
    absl::StatusOr<ssl::context> tls = TlsContext(*options.https, options.name);
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
    return absl::UnavailableError(absl::StrCat(options.name, ": cannot listen on ", host,
                                               " port ", port, ": ", ec.message()));
  }
  const int bound = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl), bound));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  Impl* impl = impl_.get();
  {
    std::lock_guard<std::mutex> lock(impl->busy_mu);
    impl->stopping = true;
  }
  asio::post(impl->io, [impl] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_retry.cancel();
  });
  {
    std::unique_lock<std::mutex> lock(impl->busy_mu);
    impl->idle.wait(lock, [impl] { return impl->busy == 0; });
  }
  asio::post(impl->io, [impl] {
    for (Connection* connection : impl->open) connection->Abort();
    impl->work.reset();
    impl->io.stop();
  });
  if (impl->thread.joinable()) impl->thread.join();
}

}  // namespace gatescope
