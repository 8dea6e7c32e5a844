#include "server/app/server_options.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <climits>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

absl::Status OutOfRange(absl::string_view name, const std::string& value,
                        absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, " = ", value, " is out of range (", range, ")"));
}

absl::Status CheckRange(const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return OutOfRange(name, absl::StrCat(value), absl::StrCat(lo, "..", hi));
}

bool IsIpLiteral(int family, const std::string& host) {
  in6_addr buf{};  // large enough for either family
  return inet_pton(family, host.c_str(), &buf) == 1;
}

}  // namespace

absl::Status ValidateHost(absl::string_view host) {
  const std::string h(host);
  if (h == "localhost" || IsIpLiteral(AF_INET, h) || IsIpLiteral(AF_INET6, h)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "host = '", host, "' is not localhost or an IP literal (e.g. 127.0.0.1, 0.0.0.0, ::1, ::;",
      " IPv6 without brackets)"));
}

std::string ListenAddress(absl::string_view host, int port) {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::Status ValidateGrpcLimits(const GrpcLimits& g, int max_message_bytes) {
  constexpr int64_t kTiB = int64_t{1} << 40;
  const int64_t least = 2 * int64_t{max_message_bytes};
  if (g.memory_bytes < least || g.memory_bytes > kTiB) {
    return OutOfRange("grpc_memory_bytes", absl::StrCat(g.memory_bytes),
                      absl::StrCat("2 x max_message_bytes = ", least, "..1 TiB"));
  }
  for (const absl::Status& st :
       {CheckRange("grpc_max_threads", g.max_threads, 4, 65536),
        CheckRange("grpc_max_concurrent_streams", g.max_concurrent_streams, 1, 65536),
        CheckRange("grpc_max_connection_idle_ms", g.max_connection_idle_ms, 1000, INT_MAX),
        CheckRange("grpc_keepalive_time_ms", g.keepalive_time_ms, 1000, INT_MAX),
        CheckRange("grpc_keepalive_timeout_ms", g.keepalive_timeout_ms, 1000, INT_MAX),
        CheckRange("grpc_min_ping_interval_ms", g.min_recv_ping_interval_ms, 1000, INT_MAX),
        CheckRange("grpc_max_ping_strikes", g.max_ping_strikes, 1, 1000)}) {
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status ValidateServerOptions(const ServerOptions& o) {
  if (o.model_repository.empty()) return absl::InvalidArgumentError("model_repository is empty");
  if (absl::Status host = ValidateHost(o.host); !host.ok()) return host;
  if (o.grpc_port < 0 || o.grpc_port > 65535) {
    return OutOfRange("grpc_port", absl::StrCat(o.grpc_port), "0..65535");
  }
  // sockaddr_un's sun_path holds 108 bytes, the terminating NUL included. Clients name the
  // socket as a URI (unix:PATH), where '%', '?' and '#' would be decoded or cut off.
  if (o.grpc_unix_socket.size() > 107 ||
      o.grpc_unix_socket.find_first_of(std::string("%?#\0", 4)) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grpc_unix_socket = '", absl::CHexEscape(o.grpc_unix_socket),
        "' is not a usable Unix socket path (at most 107 bytes, none of NUL, %, ?, #)"));
  }
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return OutOfRange("metrics_port", absl::StrCat(o.metrics_port), "-1..65535");
  }
  if (o.http_port < -1 || o.http_port > 65535) {
    return OutOfRange("http_port", absl::StrCat(o.http_port), "-1..65535");
  }
  if (o.torch_threads < 0 || o.torch_threads > 1024) {
    return OutOfRange("torch_threads", absl::StrCat(o.torch_threads), "0..1024");
  }
  if (o.forward_idle_poll < absl::ZeroDuration() || o.forward_idle_poll > kMaxIdlePoll) {
    return OutOfRange("forward_idle_poll", absl::FormatDuration(o.forward_idle_poll),
                      absl::StrCat("0..", absl::FormatDuration(kMaxIdlePoll)));
  }
  const ServingDefaults& d = o.defaults;
  if (d.max_batch_size < 1 || d.max_batch_size > 4096) {
    return OutOfRange("max_batch_size", absl::StrCat(d.max_batch_size), "1..4096");
  }
  if (d.max_queue_size < 1) return OutOfRange("max_queue_size", absl::StrCat(d.max_queue_size), ">= 1");
  if (d.max_queue_delay < absl::ZeroDuration() || d.max_queue_delay > absl::Seconds(60)) {
    return OutOfRange("max_queue_delay", absl::FormatDuration(d.max_queue_delay), "0..60s");
  }
  if (d.instances < 1 || d.instances > 64) {
    return OutOfRange("instances", absl::StrCat(d.instances), "1..64");
  }
  if (o.repository_poll_interval <= absl::ZeroDuration()) {
    return OutOfRange("repository_poll_interval",
                      absl::FormatDuration(o.repository_poll_interval), "> 0");
  }
  if (o.drain_timeout < absl::ZeroDuration()) {
    return OutOfRange("drain_timeout", absl::FormatDuration(o.drain_timeout), ">= 0");
  }
  const SecurityOptions& sec = o.security;
  if (sec.tls_cert_file.empty() != sec.tls_key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert_file and tls_key_file go together");
  }
  if (!sec.tls_client_ca_file.empty() && sec.tls_cert_file.empty()) {
    return absl::InvalidArgumentError("tls_client_ca_file (mutual TLS) needs tls_cert_file");
  }
  if (sec.access.exempt.count(Access::kModelControl) > 0) {
    return absl::InvalidArgumentError("model control cannot be exempt from authentication");
  }
  if (o.preparation_threads < 0 || o.preparation_threads > 256) {
    return OutOfRange("preparation_threads", absl::StrCat(o.preparation_threads), "0..256");
  }
  if (o.preparation_queue < 1) {
    return OutOfRange("preparation_queue", absl::StrCat(o.preparation_queue), ">= 1");
  }
  if (o.max_response_bytes < (int64_t{1} << 20)) {
    return OutOfRange("max_response_bytes", absl::StrCat(o.max_response_bytes), ">= 1 MiB");
  }
  if (o.explain_max_bytes < 1) {
    return OutOfRange("explain_max_bytes", absl::StrCat(o.explain_max_bytes), ">= 1");
  }
  if (o.max_message_bytes < 1024 || o.max_message_bytes > (1 << 30)) {
    return OutOfRange("max_message_bytes", absl::StrCat(o.max_message_bytes), "1 KiB..1 GiB");
  }
  return ValidateGrpcLimits(o.grpc, o.max_message_bytes);
}

}  // namespace gatescope
