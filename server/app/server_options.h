// Everything gatescope-server is configured with. main.cc fills it from flags; tests fill
// it directly. Plain data.
#pragma once

#include <cstdint>
#include <string>

#include "server/auth/access_control.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/common/cpu_list.h"
#include "server/config/serving_config.h"

namespace gatescope {

inline constexpr char kAutoOpsLibrary[] = "auto";

// Bounds on what gRPC clients may make the server hold (docs/reliability.md). Each field
// becomes one ServerBuilder setting (GrpcServerArguments in server.h, ResourceQuota).
struct GrpcLimits {
  // ResourceQuota size: the memory gRPC may take for every connection's buffers together.
  // gRPC 1.51 reads a message whole before checking max_message_bytes, so this, not
  // max_message_bytes, bounds what oversized messages can pin: a call whose buffers would
  // exceed it is reset (ENHANCE_YOUR_CALM; the client sees RESOURCE_EXHAUSTED).
  int64_t memory_bytes = int64_t{1} << 30;
  // ResourceQuota::SetMaxThreads: threads of the synchronous services (reflection); the
  // callback services and Torch's workers are outside it.
  int max_threads = 64;
  int max_concurrent_streams = 128;  // calls in progress on one connection
  int max_connection_idle_ms = 5 * 60 * 1000;  // a connection without calls is closed (GOAWAY)
  int keepalive_time_ms = 60 * 1000;  // the server pings a quiet connection this often...
  int keepalive_timeout_ms = 20 * 1000;  // ...and closes it if the ack takes longer
  // Client pings closer together than this without data count as strikes; after more
  // than max_ping_strikes the connection is closed (GOAWAY too_many_pings).
  int min_recv_ping_interval_ms = 10 * 1000;
  int max_ping_strikes = 2;
};

// Transport security and who may call what. TLS: cert + key (PEM files) serve gRPC over
// TLS; with client_ca as well, clients must present a certificate it signed (mutual TLS).
// Tokens: see AccessOptions (server/auth/access_control.h).
// /metrics follows: HTTPS with the same certificate, key and client CA whenever gRPC uses
// TLS, unless metrics_tls is false (plain HTTP, e.g. for a scraper inside the pod).
struct SecurityOptions {
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  bool metrics_tls = true;
  AccessOptions access;
};

struct ServerOptions {
  std::string model_repository = "model_repository";
  // Op library (.so) to load before any model; kAutoOpsLibrary: the one built beside the
  // running binary (../models/ops/libgatescope_ops.so), if there is one; empty: none.
  std::string ops_library;
  // If set, "grpc=<port> metrics=<port> http=<port>" is written there (atomically) once
  // serving (-1 for a disabled one).
  std::string port_file;
  // Where gRPC and /metrics listen: "localhost", an IPv4 literal ("127.0.0.1", "0.0.0.0")
  // or an IPv6 literal without brackets ("::1", "::"); see ValidateHost.
  std::string host = "127.0.0.1";
  int grpc_port = 8001;     // 0 picks a free port
  // If set, gRPC also listens on this Unix domain socket (gRPC address "unix:<path>"): the
  // same services, credentials, tokens and limits as the port. For a client on the same
  // machine (a sidecar, a pod's other container): no TCP stack per message. A socket left
  // at the path by a process that is gone is replaced; one a process still listens on, or
  // any other file, stops the start (CheckUnixSocketPathFree). gRPC removes the socket at
  // shutdown. Who may connect is decided by the file's permissions (the process's umask)
  // and its directory's.
  std::string grpc_unix_socket;
  int metrics_port = 8002;  // 0 picks a free port; -1 disables /metrics
  int http_port = 8000;     // KServe v2 REST; 0 picks a free port; -1 disables it
  bool http_viewer = true;  // the browser viewer at /viewer/ on the REST port
  int torch_threads = 0;    // intra-op threads per forward; 0: ChooseTorchThreads
  // Start moves the calling thread, and so every thread the server starts, to SCHED_BATCH;
  // forward passes run under the process's policy (server/common/thread_scheduling.h).
  // Process-wide and not undone: for the server binary, not for tests sharing a process.
  bool request_threads_batch_scheduling = false;
  // If set, forward passes run on these CPUs and every other thread on the process's other
  // CPUs (all of them when none is left); Start refuses CPUs the process may not use.
  // Process-wide and not undone, like the scheduling policy.
  CpuList forward_cpus;
  // With forward_cpus leaving other CPUs apart: every model's DynamicBatchingConfig
  // idle_poll (a worker checks for arrivals this long before it sleeps). Ignored otherwise
  // (a polling worker would take a shared CPU from the request threads).
  absl::Duration forward_idle_poll = absl::Microseconds(500);
  ServingDefaults defaults;  // per model, unless its config.pbtxt says otherwise
  enum class ModelControl { kNone, kExplicit, kPoll };
  ModelControl model_control = ModelControl::kNone;
  absl::Duration repository_poll_interval = absl::Seconds(15);  // with kPoll
  absl::Duration drain_timeout = absl::Seconds(10);  // Shutdown: time for calls in flight
  int64_t explain_max_bytes = int64_t{256} << 20;    // per explain request
  int64_t max_response_bytes = int64_t{64} << 20;    // dense outputs of one call
  int max_message_bytes = 16 << 20;  // largest request accepted (gRPC message, REST body)
  // Threads decoding encoded images before they are queued (PreparationPool; 0: one per
  // core) and how many requests' images may wait for them (RESOURCE_EXHAUSTED beyond).
  // Decode memory at once is at most threads x one image (kMaxInputPixels x 3 bytes).
  int preparation_threads = 0;
  int preparation_queue = 1024;
  GrpcLimits grpc;
  SecurityOptions security;
};

// INVALID_ARGUMENT naming the first option out of range (host per ValidateHost; ports
// 0..65535, metrics -1 too; a Unix socket path of at most 107 bytes, without NUL, %, ? or
// #; threads >= 0; batch size 1..4096; queue size >= 1; delay and timeouts >= 0; instances
// 1..64; http port -1..65535; poll interval > 0; explain cap > 0; message size 1 KiB..1 GiB;
// the gRPC limits per ValidateGrpcLimits).
absl::Status ValidateServerOptions(const ServerOptions& options);

// OK for "localhost", an IPv4 literal or an IPv6 literal (no brackets, no zone);
// INVALID_ARGUMENT otherwise: other host names are refused rather than resolved, so what
// the server binds never depends on DNS.
absl::Status ValidateHost(absl::string_view host);

// "host:port" as gRPC parses it: IPv6 literals bracketed ("[::1]:8001"). `host` valid.
std::string ListenAddress(absl::string_view host, int port);

// INVALID_ARGUMENT naming the first limit out of range: memory 2 x max_message_bytes..1 TiB
// (measured: a quota equal to max_message_bytes resets a message of 90% of it, twice
// receives one of the full size), threads 4..65536, streams
// 1..65536, idle, keepalive time and timeout and ping interval 1000 ms..INT_MAX, ping
// strikes 1..1000 (gRPC reads 0 as unlimited).
absl::Status ValidateGrpcLimits(const GrpcLimits& limits, int max_message_bytes);

}  // namespace gatescope
