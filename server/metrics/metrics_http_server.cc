#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <prometheus/text_serializer.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gatescope {
namespace {

constexpr int kPollMillis = 200;
constexpr size_t kMaxRequestBytes = 8192;
constexpr int kConnectionMillis = 2000;

void WriteAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string Response(const std::string& status, const std::string& type,
                     const std::string& body, const std::string& extra_headers = "") {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type, "\r\n", extra_headers,
                      "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

// The value of header `name` (lower case) in the request head; empty when absent.
std::string HeaderValue(const std::string& head, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), name)) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "";
}

// A socket address for `host` ("localhost": 127.0.0.1; an IPv4 or IPv6 literal) and `port`;
// INVALID_ARGUMENT for anything else (names are not resolved).
absl::StatusOr<sockaddr_storage> SocketAddress(const std::string& host, int port, socklen_t* len) {
  sockaddr_storage storage{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  const std::string literal = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, literal.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, literal.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(sockaddr_in6);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics host must be localhost or an IPv4/IPv6 literal: ", host));
  }
  return storage;
}

int PortOf(const sockaddr_storage& addr) {
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port)
                                    : ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
    std::function<void()> before_scrape, const AccessControl* access) {
  socklen_t len = 0;
  absl::StatusOr<sockaddr_storage> addr = SocketAddress(host, port, &len);
  if (!addr.ok()) return addr.status();
  auto* sa = reinterpret_cast<sockaddr*>(&*addr);
  const int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket() failed: ", std::strerror(errno)));
  const int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // "::" takes IPv4 too, as gRPC's "[::]:port" does, whatever the system default.
  if (addr->ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (bind(fd, sa, len) != 0 || listen(fd, 64) != 0 || getsockname(fd, sa, &len) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, " port ", port, ": ", err));
  }
  std::unique_ptr<MetricsHttpServer> server(
      new MetricsHttpServer(fd, PortOf(*addr), std::move(registry), std::move(before_scrape),
                            access));
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

MetricsHttpServer::MetricsHttpServer(int fd, int port,
                                     std::shared_ptr<prometheus::Registry> registry,
                                     std::function<void()> before_scrape,
                                     const AccessControl* access)
    : listen_fd_(fd),
      port_(port),
      registry_(std::move(registry)),
      before_scrape_(std::move(before_scrape)),
      access_(access) {}

MetricsHttpServer::~MetricsHttpServer() {
  Stop();
  close(listen_fd_);
}

void MetricsHttpServer::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void MetricsHttpServer::Serve() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, kPollMillis) <= 0) continue;
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    HandleConnection(conn);
    close(conn);
  }
}

void MetricsHttpServer::HandleConnection(int conn) {
  // One slow or stalled peer may hold this thread for at most ~kConnectionMillis reading
  // plus the send timeout, so Stop() and other scrapers are never blocked for long.
  const timeval send_timeout{2, 0};
  setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kConnectionMillis);
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0 || stop_.load()) return;
    pollfd p{conn, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return;
    const ssize_t n = recv(conn, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  if (absl::StartsWith(request, "GET /metrics ") || absl::StartsWith(request, "GET /metrics?")) {
    if (access_ != nullptr) {
      const absl::Status allowed =
          access_->Check(HeaderValue(request, "authorization"), Access::kMetrics);
      if (!allowed.ok()) {
        WriteAll(conn, Response("401 Unauthorized", "text/plain",
                                std::string(allowed.message()) + "\n",
                                "WWW-Authenticate: Bearer realm=\"gatescope\"\r\n"));
        return;
      }
    }
    if (before_scrape_) before_scrape_();
    const std::string body = prometheus::TextSerializer().Serialize(registry_->Collect());
    WriteAll(conn, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body));
  } else if (absl::StartsWith(request, "GET ")) {
    WriteAll(conn, Response("404 Not Found", "text/plain", "see /metrics\n"));
  } else {
    WriteAll(conn, Response("405 Method Not Allowed", "text/plain", "GET only\n"));
  }
}

}  // namespace gatescope
