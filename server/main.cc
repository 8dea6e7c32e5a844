// gatescope-server: flags -> ServerOptions, signals -> graceful drain. The only file that
// reads flags; everything else is Server (server/app).
//
// Command-line contract: --help (and --helpfull) print the usage with every flag's default
// and exit 0; an unknown flag, an unparsable value, a stray argument or a value out of
// range is reported on stderr and exits 2.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "server/allocator.h"
#include "server/app/blas_core.h"
#include "server/app/library_logs.h"
#include "server/app/server.h"
#include "server/common/cpu_list.h"
#include "server/common/log.h"

ABSL_FLAG(std::string, model_repository, "model_repository", "Model repository root");
ABSL_FLAG(std::string, ops_library, gatescope::kAutoOpsLibrary,
          "gatescope op library (.so) to load before models; auto: the one built beside this "
          "binary (../models/ops/libgatescope_ops.so), if present; empty: none");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "Address for gRPC and metrics listeners: localhost, an IPv4 literal (127.0.0.1, "
          "0.0.0.0) or an IPv6 literal without brackets (::1, ::)");
ABSL_FLAG(int, grpc_port, 8001, "gRPC port (0 picks a free one)");
ABSL_FLAG(std::string, grpc_unix_socket, "",
          "If set, gRPC also listens on this Unix domain socket path (clients: "
          "unix:<path>), with the port's services, credentials and limits; access follows "
          "the socket file's permissions");
ABSL_FLAG(int, metrics_port, 8002, "Prometheus /metrics port (0 picks a free one, -1 disables)");
ABSL_FLAG(int, http_port, 8000,
          "KServe v2 REST (HTTP/JSON) port (0 picks a free one, -1 disables); HTTPS when "
          "--tls_cert_file is set");
ABSL_FLAG(bool, http_viewer, true,
          "Serve the browser viewer at /viewer/ on the REST port (its API calls are checked "
          "like any client's); false answers 404 there");
ABSL_FLAG(std::string, port_file, "",
          "If set, write 'grpc=<port> metrics=<port> http=<port>' here once serving");
ABSL_FLAG(int, torch_threads, 0,
          "Intra-op threads of each forward pass, 0..1024 (0: automatic, (usable cores - 1) / "
          "--instances, at least 1; usable cores follow the CPU affinity and cgroup quota)");
ABSL_FLAG(bool, request_threads_batch_scheduling, true,
          "Run every thread but the forward passes' (gRPC, HTTP, decoding, control) under "
          "Linux SCHED_BATCH, so that arriving requests do not preempt a running forward; "
          "no privilege needed (docs/performance.md)");
ABSL_FLAG(gatescope::CpuList, forward_cpus, {},
          "CPUs for the forward passes, as taskset -c writes them (\"0\", \"1-7\"); every "
          "other thread (gRPC, HTTP, decoding, control) runs on the process's remaining CPUs. "
          "Empty: no placement. With spare cores this keeps the request path from slowing the "
          "forwards (docs/performance.md)");
ABSL_FLAG(int, max_batch_size, 16,
          "Default largest batch per execution, 1..4096 (capped by the model; config.pbtxt "
          "overrides)");
ABSL_FLAG(int, max_queue_size, 256,
          "Default waiting requests per model and priority level before RESOURCE_EXHAUSTED");
ABSL_FLAG(int, forward_idle_poll_us, 500,
          "With --forward_cpus leaving CPUs apart: how long a model's worker that finds its "
          "queue empty keeps its CPU checking for a request before it sleeps (at once when "
          "another model's request arrives or runs); an arrival in that window starts "
          "without a wake-up. 0: sleep at once. Ignored without CPUs apart");
ABSL_FLAG(bool, early_batch_release, true,
          "Run a batch before its queue delay ends when arrivals are sparse (the mean gap "
          "between recent arrivals is longer than the rest of the delay), so a lone caller "
          "does not wait the delay; false waits the whole delay as Triton does");
ABSL_FLAG(int, max_queue_delay_us, 0,
          "Default dynamic-batching delay: how long the oldest request may wait for a fuller "
          "batch, 0..60000000 (config.pbtxt overrides)");
ABSL_FLAG(bool, cuda_graphs, false,
          "GPU instances record each input shape's forward as a CUDA graph and replay it, "
          "which saves the launch cost of models made of many small kernels; a model's "
          "config.pbtxt `optimization { cuda { graphs: ... } }` overrides (docs/gpu.md)");
ABSL_FLAG(bool, warm_up, true,
          "Before a model version serves, each instance runs forwards on a zero example "
          "(batch 1 twice, or config.pbtxt's model_warmup samples; every batch bucket with "
          "CUDA graphs), so that the first requests do not pay TorchScript's profiling runs "
          "or graph recording (docs/performance.md)");
ABSL_FLAG(int, instances, 1, "Default model instances (worker threads) per model, 1..64");
ABSL_FLAG(int, drain_seconds, 10, "On SIGINT/SIGTERM, time allowed for in-flight calls");
ABSL_FLAG(std::string, model_control, "none",
          "none: models are fixed at start; explicit: the KServe v2 repository API may load and "
          "unload models; poll: the repository directory is polled for new, changed and "
          "removed models");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain: serve gRPC over TLS (with --tls_key_file)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA certificates: clients must present a certificate one of them signed "
          "(mutual TLS; needs --tls_cert_file)");
ABSL_FLAG(bool, metrics_tls, true,
          "With --tls_cert_file, serve /metrics over HTTPS with the same certificate, key and "
          "client CA; false keeps /metrics on plain HTTP");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "Bearer tokens (one per line, at least 16 characters) allowed health, metadata, "
          "inference and /metrics; with this or --admin_tokens_file every other call gets "
          "UNAUTHENTICATED (gRPC) or 401 (/metrics)");
ABSL_FLAG(std::string, admin_tokens_file, "",
          "Bearer tokens also allowed model control (RepositoryModelLoad/Unload); inference "
          "tokens get PERMISSION_DENIED there");
ABSL_FLAG(std::string, auth_exempt, "health",
          "Comma-separated categories open without a token: health (grpc.health.v1, what "
          "probes call, and KServe ServerLive/ServerReady/ModelReady), metadata, inference, "
          "metrics");
ABSL_FLAG(int, return_unused_memory_seconds, 30,
          "Every this many seconds, memory the allocator holds unused goes back to the system "
          "(0: never); between these returns freed memory is reused without page faults");
ABSL_FLAG(int64_t, max_response_bytes, int64_t{64} << 20,
          "Largest dense prediction of one call (segmentation masks and probabilities; a "
          "KServe call's examples share it): larger ones get RESOURCE_EXHAUSTED before they "
          "are allocated");
ABSL_FLAG(int, preparation_threads, 0,
          "Threads decoding encoded images before they are queued on their model (0: one per "
          "core); a model's own workers never decode them");
ABSL_FLAG(int, preparation_queue, 1024,
          "Requests whose images may wait for the preparation threads; RESOURCE_EXHAUSTED "
          "beyond");
ABSL_FLAG(int64_t, explain_max_bytes, int64_t{256} << 20,
          "Largest peak bytes one explain request may hold (maps of one layer, rollout state, "
          "returned maps; docs/explain.md); larger requests get RESOURCE_EXHAUSTED");
ABSL_FLAG(int, repository_poll_seconds, 15, "Polling interval with --model_control=poll");
// gRPC limits (docs/reliability.md); defaults come from ServerOptions.
ABSL_FLAG(int, max_message_bytes, gatescope::ServerOptions().max_message_bytes,
          "Largest request accepted, 1024..1073741824: gRPC messages (larger ones get "
          "RESOURCE_EXHAUSTED from gRPC) and REST bodies (larger ones get 413)");
ABSL_FLAG(int64_t, grpc_memory_bytes, gatescope::GrpcLimits().memory_bytes,
          "gRPC ResourceQuota: memory for all connections' buffers together, "
          "2 x max_message_bytes..1 TiB");
ABSL_FLAG(int, grpc_max_threads, gatescope::GrpcLimits().max_threads,
          "gRPC ResourceQuota: threads of the synchronous services (reflection), 4..65536");
ABSL_FLAG(int, grpc_max_concurrent_streams, gatescope::GrpcLimits().max_concurrent_streams,
          "Calls in progress per connection (HTTP/2 MAX_CONCURRENT_STREAMS), 1..65536; "
          "further calls wait on the client");
ABSL_FLAG(int, grpc_max_connection_idle_ms, gatescope::GrpcLimits().max_connection_idle_ms,
          "A connection without calls for this long is closed (GOAWAY), >= 1000");
ABSL_FLAG(int, grpc_keepalive_time_ms, gatescope::GrpcLimits().keepalive_time_ms,
          "The server pings a quiet connection this often, >= 1000");
ABSL_FLAG(int, grpc_keepalive_timeout_ms, gatescope::GrpcLimits().keepalive_timeout_ms,
          "A keepalive ping unanswered for this long closes the connection, >= 1000");
ABSL_FLAG(int, grpc_min_ping_interval_ms, gatescope::GrpcLimits().min_recv_ping_interval_ms,
          "Client pings closer together than this (without data) are strikes, >= 1000");
ABSL_FLAG(int, grpc_max_ping_strikes, gatescope::GrpcLimits().max_ping_strikes,
          "Strikes tolerated before the connection is closed (GOAWAY too_many_pings), 1..1000");

namespace gatescope {
namespace {

constexpr int kUsageError = 2;

// Abseil 20220623 ends the process with exit(1) both for --help and for a bad command line
// (there is no hook to change that); our contract is 0 and 2. This handler, armed only
// while parsing, rewrites that status.
bool g_parsing = false;

// Whether the command line asks for one of Abseil's own usage outputs (--help,
// --helpfull, --helpon=..., --version, ...). Abseil's registry does not expose those flags,
// so their names are looked for among the arguments (parsing stays Abseil's).
bool g_usage_asked = false;

bool AsksForUsage(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--")) absl::ConsumePrefix(&arg, "-");
    for (const char* name : {"help", "helpfull", "helpshort", "helppackage", "version"}) {
      if (arg == name) return true;
    }
    if (absl::StartsWith(arg, "helpon=") || absl::StartsWith(arg, "helpmatch=")) return true;
  }
  return false;
}

void RewriteParseExit() {
  if (!g_parsing) return;
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(g_usage_asked ? 0 : kUsageError);
}

// Parses flags or exits (0 after --help, 2 on any error).
void ParseFlagsOrExit(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "serves the TorchScript models of a model repository over gRPC "
      "(gatescope.v1 and KServe v2) with Prometheus metrics.\n"
      "usage: gatescope-server [--flag=value ...]");
  absl::FlagsUsageConfig usage;
  // --help lists the flags of this file (Abseil's default filter matches none here).
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "server/main.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  g_usage_asked = AsksForUsage(argc, argv);
  std::atexit(RewriteParseExit);
  g_parsing = true;
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  g_parsing = false;
  if (rest.size() > 1) {
    std::cerr << "gatescope-server: unexpected argument '" << rest[1]
              << "' (flags are --name=value; see --help)\n";
    std::exit(kUsageError);
  }
}

GrpcLimits GrpcLimitsFromFlags() {
  GrpcLimits g;
  g.memory_bytes = absl::GetFlag(FLAGS_grpc_memory_bytes);
  g.max_threads = absl::GetFlag(FLAGS_grpc_max_threads);
  g.max_concurrent_streams = absl::GetFlag(FLAGS_grpc_max_concurrent_streams);
  g.max_connection_idle_ms = absl::GetFlag(FLAGS_grpc_max_connection_idle_ms);
  g.keepalive_time_ms = absl::GetFlag(FLAGS_grpc_keepalive_time_ms);
  g.keepalive_timeout_ms = absl::GetFlag(FLAGS_grpc_keepalive_timeout_ms);
  g.min_recv_ping_interval_ms = absl::GetFlag(FLAGS_grpc_min_ping_interval_ms);
  g.max_ping_strikes = absl::GetFlag(FLAGS_grpc_max_ping_strikes);
  return g;
}

absl::StatusOr<SecurityOptions> SecurityFromFlags() {
  SecurityOptions sec;
  sec.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  sec.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  sec.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  sec.metrics_tls = absl::GetFlag(FLAGS_metrics_tls);
  sec.access.tokens_file = absl::GetFlag(FLAGS_auth_tokens_file);
  sec.access.admin_tokens_file = absl::GetFlag(FLAGS_admin_tokens_file);
  sec.access.exempt.clear();
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_auth_exempt), ',', absl::SkipWhitespace())) {
    absl::StatusOr<Access> access = ExemptAccessNamed(absl::StripAsciiWhitespace(name));
    if (!access.ok()) return access.status();
    sec.access.exempt.insert(*access);
  }
  return sec;
}

absl::StatusOr<ServerOptions> OptionsFromFlags() {
  ServerOptions o;
  o.model_repository = absl::GetFlag(FLAGS_model_repository);
  o.ops_library = absl::GetFlag(FLAGS_ops_library);
  o.port_file = absl::GetFlag(FLAGS_port_file);
  o.host = absl::GetFlag(FLAGS_host);
  o.grpc_port = absl::GetFlag(FLAGS_grpc_port);
  o.grpc_unix_socket = absl::GetFlag(FLAGS_grpc_unix_socket);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.http_port = absl::GetFlag(FLAGS_http_port);
  o.http_viewer = absl::GetFlag(FLAGS_http_viewer);
  o.torch_threads = absl::GetFlag(FLAGS_torch_threads);
  o.request_threads_batch_scheduling = absl::GetFlag(FLAGS_request_threads_batch_scheduling);
  o.forward_cpus = absl::GetFlag(FLAGS_forward_cpus);
  o.forward_idle_poll = absl::Microseconds(absl::GetFlag(FLAGS_forward_idle_poll_us));
  o.defaults.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  o.defaults.max_queue_size = absl::GetFlag(FLAGS_max_queue_size);
  o.defaults.max_queue_delay = absl::Microseconds(absl::GetFlag(FLAGS_max_queue_delay_us));
  o.defaults.early_batch_release = absl::GetFlag(FLAGS_early_batch_release);
  o.defaults.instances = absl::GetFlag(FLAGS_instances);
  o.defaults.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  o.defaults.warm_up = absl::GetFlag(FLAGS_warm_up);
  o.drain_timeout = absl::Seconds(absl::GetFlag(FLAGS_drain_seconds));
  o.explain_max_bytes = absl::GetFlag(FLAGS_explain_max_bytes);
  o.max_response_bytes = absl::GetFlag(FLAGS_max_response_bytes);
  o.preparation_threads = absl::GetFlag(FLAGS_preparation_threads);
  o.preparation_queue = absl::GetFlag(FLAGS_preparation_queue);
  o.repository_poll_interval = absl::Seconds(absl::GetFlag(FLAGS_repository_poll_seconds));
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.grpc = GrpcLimitsFromFlags();
  absl::StatusOr<SecurityOptions> security = SecurityFromFlags();
  if (!security.ok()) return security.status();
  o.security = *std::move(security);
  const std::string control = absl::GetFlag(FLAGS_model_control);
  if (control == "none") {
    o.model_control = ServerOptions::ModelControl::kNone;
  } else if (control == "explicit") {
    o.model_control = ServerOptions::ModelControl::kExplicit;
  } else if (control == "poll") {
    o.model_control = ServerOptions::ModelControl::kPoll;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("model_control = ", control, " (none, explicit or poll)"));
  }
  if (absl::Status st = ValidateServerOptions(o); !st.ok()) return st;
  return o;
}

// SIGINT/SIGTERM are turned into a byte on a pipe (the handler only write()s, which is
// async-signal-safe); a waiter thread reads it. A handler rather than sigwait is needed
// because libraries start threads before main() runs, so a signal mask set here cannot
// cover every thread.
int g_signal_pipe[2] = {-1, -1};

void OnTerminationSignal(int sig) {
  const int saved_errno = errno;
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &byte, 1);  // non-blocking
  errno = saved_errno;
}

bool InstallSignalHandlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return false;
  // Only the write end is non-blocking: the handler must never block, the waiter should.
  if (fcntl(g_signal_pipe[1], F_SETFL, O_NONBLOCK) != 0) return false;
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  return sigaction(SIGINT, &action, nullptr) == 0 && sigaction(SIGTERM, &action, nullptr) == 0;
}

// Blocks until a termination signal arrives; returns its number.
int AwaitTerminationSignal() {
  char byte = 0;
  while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

int Run() {
  absl::StatusOr<ServerOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    std::cerr << "gatescope-server: " << options.status().message() << "\n";
    return kUsageError;
  }
  if (!InstallSignalHandlers()) {
    GS_LOG(ERROR) << "cannot install signal handlers";
    return 1;
  }
  // Malformed messages make protobuf log a line each; any client could flood the log.
  LimitProtobufLogs(RealClock::Get());
  // Debian builds Abseil without NDEBUG, so every Mutex acquisition would also update a
  // lock-order graph (a deadlock detector: measurable on the request path, docs/
  // performance.md). The unit tests keep it; the server does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (absl::GetFlag(FLAGS_return_unused_memory_seconds) < 0) {
    std::cerr << "gatescope-server: return_unused_memory_seconds must be >= 0\n";
    return kUsageError;
  }
  GS_LOG(INFO) << "allocator: " << DescribeAllocator();
  GS_LOG(INFO) << "BLAS: " << DescribeBlasCore();
  auto server = Server::Start(*options);
  if (!server.ok()) {
    GS_LOG(ERROR) << server.status();
    return 1;
  }
  // Started after the server, so that its thread has the request threads' policy.
  const UnusedMemoryReturner returner(
      absl::Seconds(absl::GetFlag(FLAGS_return_unused_memory_seconds)));
  std::thread waiter([&server] {
    const int sig = AwaitTerminationSignal();
    GS_LOG(INFO) << "signal " << sig << ": draining";
    (*server)->Shutdown();
  });
  (*server)->Wait();
  waiter.join();
  server->reset();
  GS_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace
}  // namespace gatescope

int main(int argc, char** argv) {
  // Before anything else: may replace this process with itself (blas_core.h says why).
  gatescope::ReexecWithBetterOpenBlasCore(argv);
  gatescope::ParseFlagsOrExit(argc, argv);
  return gatescope::Run();
}
