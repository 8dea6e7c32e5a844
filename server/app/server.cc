#include "server/app/server.h"

#include <ATen/Parallel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/app/torch_threads.h"
#include "server/app/unix_socket_path.h"
#include "server/batching/dynamic_batcher.h"
#include "server/batching/preparation_pool.h"
#include "server/batching/preparing_scheduler.h"
#include "server/common/cpu_list.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"
#include "server/common/thread_scheduling.h"
#include "server/frontend/grpc/health_service.h"
#include "server/frontend/grpc/inference_service.h"
#include "server/frontend/grpc/kserve_service.h"
#include "server/frontend/http/rest_api.h"
#include "server/metrics/metrics_http_server.h"
#include "server/metrics/server_metrics.h"
#include "server/repository/model_repository.h"
#include "server/repository/repository_poller.h"
#include "server/runtime/op_library.h"
#include "server/runtime/torchscript_runner.h"

namespace gatescope {

// Declared in the order they start; destroyed in reverse.
struct Server::State {
  ServerOptions options;
  TorchScriptLoader torchscript;  // used when no loader is injected
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<AccessControl> access;  // who may call what; outlives the services
  std::unique_ptr<MetricsHttpServer> metrics_server;
  std::unique_ptr<HealthService> health;  // outlives the repository, which updates it
  std::unique_ptr<PreparationPool> preparation;  // outlives the models' schedulers
  // With --forward_cpus apart: finishes predictions on the request CPUs (ModelInstance);
  // outlives the models' instances.
  std::unique_ptr<PreparationPool> replies;
  std::unique_ptr<ModelRepository> repository;
  std::unique_ptr<V1Core> v1;         // the calls, for every transport
  std::unique_ptr<KServeCore> kserve_core;
  std::unique_ptr<InferenceService> inference;
  std::unique_ptr<KServeService> kserve;
  std::unique_ptr<grpc::Server> grpc;
  std::unique_ptr<PreparationPool> rest_pool;  // parses large REST bodies; outlives `http`
  std::unique_ptr<RestApi> rest;
  std::unique_ptr<HttpServer> http;  // the REST port; before it stops, rest outlives it
  std::unique_ptr<RepositoryPoller> poller;
  int grpc_port = 0;
  absl::Mutex mu;
  bool shut_down ABSL_GUARDED_BY(mu) = false;
};

namespace {

// Per model name: SERVING when the version answering unversioned requests is ready.
// Overall: SERVING when every model serves (ModelRepository::ServesEveryModel). Kept current
// as models change.
// Called before anything can change the repository (poller, model control).
void WireHealth(HealthService* health, ModelRepository* repo) {
  auto refresh_overall = [health, repo] { health->SetServingStatus("", repo->ServesEveryModel()); };
  for (const auto& model : repo->List()) {
    auto current = repo->Find(model->name, "");
    health->SetServingStatus(model->name, current.ok() && (*current)->ready());
  }
  refresh_overall();
  repo->SetStateListener([health, refresh_overall](const std::string& name, bool ready) {
    health->SetServingStatus(name, ready);
    refresh_overall();
  });
}

// Threads of a preparation pool: --preparation_threads, or one per core.
int PreparationThreads(const ServerOptions& options) {
  return options.preparation_threads > 0
             ? options.preparation_threads
             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

absl::Status StartRepository(Server::State& s, const ServerDeps& deps) {
  const Clock* clock = deps.clock ? deps.clock : RealClock::Get();
  RepositoryOptions repo;
  repo.root = s.options.model_repository;
  repo.defaults = s.options.defaults;
  repo.tasks.explain_max_bytes = s.options.explain_max_bytes;
  repo.tasks.response_max_bytes = s.options.max_response_bytes;
  RepositoryDeps rd;
  rd.loader = deps.loader ? deps.loader : &s.torchscript;
  rd.metrics = s.metrics.get();
  s.preparation = std::make_unique<PreparationPool>(PreparationThreads(s.options),
                                                    s.options.preparation_queue);
  rd.schedulers =
      PreparingScheduler::Wrap(s.preparation.get(), clock, DynamicBatcher::Factory(clock));
  rd.replies = s.replies.get();
  rd.clock = clock;
  GS_ASSIGN_OR_RETURN(s.repository, ModelRepository::Load(repo, std::move(rd)));
  WireHealth(s.health.get(), s.repository.get());  // before the poller can change models
  if (s.options.model_control == ServerOptions::ModelControl::kPoll) {
    s.poller = std::make_unique<RepositoryPoller>(s.repository.get(),
                                                  s.options.repository_poll_interval, clock);
  }
  return absl::OkStatus();
}

// The op library `option` names (see ServerOptions::ops_library); empty: none.
std::string ResolveOpsLibrary(const std::string& option) {
  if (option != kAutoOpsLibrary) return option;
  std::error_code ec;
  const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() /
                      "../models/ops/libgatescope_ops.so";
  return !ec && std::filesystem::exists(beside) ? beside.lexically_normal().string() : "";
}

void WritePortFile(const std::string& path, int grpc_port, int metrics_port, int http_port) {
  if (path.empty()) return;
  std::ofstream(path + ".tmp") << "grpc=" << grpc_port << " metrics=" << metrics_port
                               << " http=" << http_port << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// The limits of options.grpc that are not channel arguments: one memory and thread quota
// for the whole server, and the largest message.
void ApplyQuotaAndMessageSize(const ServerOptions& o, grpc::ServerBuilder& builder) {
  grpc::ResourceQuota quota("gatescope");
  quota.Resize(static_cast<size_t>(o.grpc.memory_bytes));
  quota.SetMaxThreads(o.grpc.max_threads);
  builder.SetResourceQuota(quota);  // the builder keeps its own reference
  builder.SetMaxReceiveMessageSize(o.max_message_bytes);
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " ", path));
  }
  return text.str();
}

// The PEM files of options.security, read; nullopt without TLS.
absl::StatusOr<std::optional<HttpsCredentials>> ReadTlsFiles(const SecurityOptions& sec) {
  if (sec.tls_cert_file.empty()) return std::nullopt;
  HttpsCredentials pem;
  GS_ASSIGN_OR_RETURN(pem.certificate_chain, ReadPem(sec.tls_cert_file, "tls_cert_file"));
  GS_ASSIGN_OR_RETURN(pem.private_key, ReadPem(sec.tls_key_file, "tls_key_file"));
  if (!sec.tls_client_ca_file.empty()) {
    GS_ASSIGN_OR_RETURN(pem.client_ca, ReadPem(sec.tls_client_ca_file, "tls_client_ca_file"));
  }
  return pem;
}

// Insecure, TLS, or mutual TLS (`pem`: the PEM files of options.security, read).
std::shared_ptr<grpc::ServerCredentials> Credentials(const std::optional<HttpsCredentials>& pem) {
  if (!pem) return grpc::InsecureServerCredentials();
  const bool mutual = !pem->client_ca.empty();
  grpc::SslServerCredentialsOptions ssl(
      mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_root_certs = pem->client_ca;
  ssl.pem_key_cert_pairs.push_back({pem->private_key, pem->certificate_chain});
  return grpc::SslServerCredentials(ssl);
}

absl::Status StartGrpc(Server::State& s, const Clock* clock,
                       const std::optional<HttpsCredentials>& pem) {
  s.v1 = std::make_unique<V1Core>(s.repository.get(), clock);
  s.kserve_core = std::make_unique<KServeCore>(
      s.repository.get(), s.options.model_control == ServerOptions::ModelControl::kExplicit,
      clock);
  s.inference = std::make_unique<InferenceService>(s.v1.get(), s.access.get());
  s.kserve = std::make_unique<KServeService>(s.kserve_core.get(), s.access.get());
  const std::shared_ptr<grpc::ServerCredentials> credentials = Credentials(pem);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = ListenAddress(s.options.host, s.options.grpc_port);
  builder.AddListeningPort(address, credentials, &s.grpc_port);
  const bool unix_socket = !s.options.grpc_unix_socket.empty();
  const std::string unix_address = "unix:" + s.options.grpc_unix_socket;
  int unix_socket_bound = 0;  // gRPC sets it non-zero once the socket is bound
  if (unix_socket) {
    GS_RETURN_IF_ERROR(CheckUnixSocketPathFree(s.options.grpc_unix_socket));
    builder.AddListeningPort(unix_address, credentials, &unix_socket_bound);
  }
  for (const auto& [name, value] : GrpcServerArguments(s.options)) {
    builder.AddChannelArgument(name, value);
  }
  ApplyQuotaAndMessageSize(s.options, builder);
  builder.RegisterService(s.inference.get());
  builder.RegisterService(s.kserve.get());
  builder.RegisterService(s.health.get());
  s.grpc = builder.BuildAndStart();
  if (!s.grpc || s.grpc_port == 0 || (unix_socket && unix_socket_bound == 0)) {
    // gRPC builds no server when any of its addresses cannot be bound.
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address,
                                               unix_socket ? " or " + unix_address : ""));
  }
  return absl::OkStatus();
}

// The KServe v2 REST API on options.http_port (HTTPS with the gRPC certificate when TLS is
// on), on the same cores as gRPC.
absl::Status StartRest(Server::State& s, const std::optional<HttpsCredentials>& pem) {
  if (s.options.http_port < 0) return absl::OkStatus();
  // As many parsing threads as decoding ones, and as many bodies waiting as images.
  s.rest_pool = std::make_unique<PreparationPool>(PreparationThreads(s.options),
                                                  s.options.preparation_queue);
  s.rest = std::make_unique<RestApi>(s.kserve_core.get(), s.v1.get(), s.access.get(),
                                     s.rest_pool.get(), s.options.http_viewer);
  HttpServerOptions http;
  http.name = "REST";
  http.https = pem;
  http.body_limit = static_cast<uint64_t>(s.options.max_message_bytes);
  http.header_limit = 16 << 10;
  http.request_timeout = absl::Seconds(60);  // a whole request, body included
  http.write_timeout = absl::Seconds(60);
  http.max_connections = 1024;
  // Bodies held at once: as much as gRPC's buffers may hold (--grpc_memory_bytes).
  http.memory_bytes = static_cast<uint64_t>(s.options.grpc.memory_bytes);
  RestApi* rest = s.rest.get();
  http.check_head = [rest](const HttpRequest& head) { return rest->CheckHead(head); };
  GS_ASSIGN_OR_RETURN(s.http, HttpServer::Start(s.options.host, s.options.http_port,
                                                [rest](HttpRequest request, HttpRespond respond) {
                                                  rest->Handle(std::move(request),
                                                               std::move(respond));
                                                },
                                                std::move(http)));
  return absl::OkStatus();
}

}  // namespace

std::map<std::string, int> GrpcServerArguments(const ServerOptions& options) {
  const GrpcLimits& g = options.grpc;
  return {
      // gRPC sets SO_REUSEPORT by default: a second server on the same port would start
      // and silently take half the connections. One port, one server.
      {GRPC_ARG_ALLOW_REUSEPORT, 0},
      {GRPC_ARG_MAX_CONCURRENT_STREAMS, g.max_concurrent_streams},
      {GRPC_ARG_MAX_CONNECTION_IDLE_MS, g.max_connection_idle_ms},
      {GRPC_ARG_KEEPALIVE_TIME_MS, g.keepalive_time_ms},
      {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, g.keepalive_timeout_ms},
      {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, g.min_recv_ping_interval_ms},
      {GRPC_ARG_HTTP2_MAX_PING_STRIKES, g.max_ping_strikes},
  };
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      ServerDeps deps) {
  GS_RETURN_IF_ERROR(ValidateServerOptions(options));
  auto state = std::make_unique<State>();
  state->options = options;
  // Where forwards and request threads run (--forward_cpus): decided before the Torch
  // threads, which it sizes.
  CpuList request_cpus;  // stays empty without --forward_cpus
  bool request_cpus_apart = false;
  // Sorted and distinct, as the set operations need (options may be built in code).
  GS_ASSIGN_OR_RETURN(const CpuList forward_cpus,
                      options.forward_cpus.cpus.empty()
                          ? absl::StatusOr<CpuList>(CpuList{})
                          : ParseCpuList(FormatCpuList(options.forward_cpus)));
  if (!forward_cpus.cpus.empty()) {
    const CpuList process_cpus = CurrentThreadCpus();
    if (!CpusWithin(forward_cpus, process_cpus)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--forward_cpus=", FormatCpuList(forward_cpus),
          " names CPUs this process may not run on (it may use ",
          FormatCpuList(process_cpus), ")"));
    }
    request_cpus = CpusNotIn(process_cpus, forward_cpus);
    request_cpus_apart = !request_cpus.cpus.empty();
    if (!request_cpus_apart) request_cpus = process_cpus;
  }
  const int instances = options.defaults.instances;
  const TorchThreads threads =
      forward_cpus.cpus.empty()
          ? ChooseTorchThreads(options.torch_threads, UsableCores(), instances)
          : ChooseTorchThreads(options.torch_threads,
                               WithinCpuQuota(static_cast<int>(forward_cpus.cpus.size())),
                               instances, request_cpus_apart);
  ApplyTorchThreads(threads.threads);
  GS_LOG(INFO) << "torch threads per forward: " << threads.threads << " (" << threads.reason
               << ")";
  if (const std::string ops = ResolveOpsLibrary(options.ops_library); !ops.empty()) {
    GS_RETURN_IF_ERROR(LoadOpLibrary(ops));
    GS_LOG(INFO) << "loaded op library " << ops;
  }
  // After ApplyTorchThreads (thread pools it sizes start threads that run forwards) and
  // before the first thread of the server's own.
  if (!request_cpus.cpus.empty()) {
    GS_RETURN_IF_ERROR(PlaceForwardPasses(forward_cpus, request_cpus));
    // Workers poll before they sleep only on CPUs of their own.
    if (request_cpus_apart) state->options.defaults.idle_poll = options.forward_idle_poll;
    GS_LOG(INFO) << "cpu placement: forward passes on CPUs "
                 << FormatCpuList(forward_cpus) << ", every other thread on CPUs "
                 << FormatCpuList(request_cpus)
                 << (request_cpus_apart
                         ? absl::StrCat("; idle workers poll ",
                                        absl::FormatDuration(options.forward_idle_poll),
                                        " before they sleep")
                         : " (no CPU left apart: shared)");
  }
  if (options.request_threads_batch_scheduling) {
    const absl::Status st = SetRequestThreadsToBatchScheduling();
    GS_LOG(INFO) << "thread scheduling: "
                 << (st.ok() ? "request threads SCHED_BATCH, forward passes SCHED_OTHER"
                             : absl::StrCat("unchanged (", st.message(), ")"));
  } else {
    GS_LOG(INFO) << "thread scheduling: unchanged (--request_threads_batch_scheduling=false)";
  }
  if (request_cpus_apart) {
    // Started here, after the placement and the policy: its threads inherit both.
    // A reply takes tens of microseconds; the bound keeps finished batches' outputs from
    // piling up behind slow sends (beyond it the worker finishes replies itself).
    const int threads = WithinCpuQuota(static_cast<int>(request_cpus.cpus.size()));
    state->replies = std::make_unique<PreparationPool>(threads, 32 * threads, "gs-reply");
  }
  state->metrics = std::make_unique<ServerMetrics>(state->registry);
  GS_ASSIGN_OR_RETURN(state->access, AccessControl::Load(options.security.access));
  // Read once, for gRPC and /metrics.
  GS_ASSIGN_OR_RETURN(const std::optional<HttpsCredentials> pem, ReadTlsFiles(options.security));
  // /metrics first: bad HTTPS files stop the server before any model loads.
  if (options.metrics_port >= 0) {
    ServerMetrics* metrics = state->metrics.get();
    MetricsHttpOptions http;
    http.before_scrape = [metrics] { metrics->RefreshProcessGauges(); };
    http.access = state->access.get();
    if (options.security.metrics_tls) http.https = pem;
    GS_ASSIGN_OR_RETURN(state->metrics_server,
                        MetricsHttpServer::Start(options.host, options.metrics_port,
                                                 state->registry, std::move(http)));
  }
  state->health = std::make_unique<HealthService>(state->access.get());
  GS_RETURN_IF_ERROR(StartRepository(*state, deps));
  GS_RETURN_IF_ERROR(StartGrpc(*state, deps.clock ? deps.clock : RealClock::Get(), pem));
  if (absl::Status st = StartRest(*state, pem); !st.ok()) {
    state->grpc->Shutdown();
    return st;
  }
  std::unique_ptr<Server> server(new Server(std::move(state)));
  GS_LOG(INFO) << "serving gRPC on " << ListenAddress(options.host, server->grpc_port())
               << ", REST on port " << server->http_port() << ", metrics on port "
               << server->metrics_port();
  WritePortFile(options.port_file, server->grpc_port(), server->metrics_port(),
                server->http_port());
  return server;
}

Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}

Server::~Server() { Shutdown(); }

int Server::grpc_port() const { return state_->grpc_port; }

int Server::http_port() const { return state_->http ? state_->http->port() : -1; }

int Server::metrics_port() const {
  return state_->metrics_server ? state_->metrics_server->port() : -1;
}

void Server::Shutdown() {
  absl::MutexLock lock(&state_->mu);
  if (state_->shut_down) return;
  state_->shut_down = true;
  State& s = *state_;
  s.health->Shutdown();  // every service reports NOT_SERVING; Watch streams end
  s.v1->BeginShutdown();
  s.kserve_core->BeginShutdown();
  if (s.poller) s.poller->Stop();
  // Queued requests run at once (batching delays no longer apply) while gRPC waits for the
  // calls in flight, up to the drain limit.
  std::thread flush([&s] { s.repository->StopAll(); });
  s.grpc->Shutdown(std::chrono::system_clock::now() + absl::ToChronoSeconds(s.options.drain_timeout));
  flush.join();
  if (s.replies) s.replies->Stop();  // the flushed requests' replies, then its threads
  if (s.http) s.http->Stop();  // REST calls in flight were answered by the flush
  if (s.rest_pool) s.rest_pool->Stop();
  if (s.metrics_server) s.metrics_server->Stop();
}

void Server::Wait() { state_->grpc->Wait(); }

}  // namespace gatescope
