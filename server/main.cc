// gatescope-server: flags -> options, wiring, signals, graceful drain.
// The only file that reads flags.
#include <ATen/Parallel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/frontend/grpc/explain_call.h"
#include "server/frontend/grpc/inference_service.h"
#include "server/frontend/grpc/kserve_service.h"
#include "server/metrics/metrics_http_server.h"
#include "server/metrics/server_metrics.h"
#include "server/repository/model_repository.h"
#include "server/runtime/op_library.h"
#include "server/runtime/torchscript_runner.h"

ABSL_FLAG(std::string, model_repository, "model_repository", "Model repository root");
ABSL_FLAG(std::string, ops_library, "",
          "gatescope op library (.so) to load before models; empty: the one built beside this "
          "binary (../models/ops/libgatescope_ops.so), if present");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address for gRPC and metrics listeners");
ABSL_FLAG(int, grpc_port, 8001, "gRPC port (0 picks a free one)");
ABSL_FLAG(int, metrics_port, 8002, "Prometheus /metrics port (0 picks a free one, -1 disables)");
ABSL_FLAG(std::string, port_file, "", "If set, write 'grpc=<port> metrics=<port>' here once serving");
ABSL_FLAG(int, torch_threads, 0, "Intra-op threads for Torch (0: all cores)");
ABSL_FLAG(int, max_batch_size, 16,
          "Default largest batch per execution (capped by the model; config.pbtxt overrides)");
ABSL_FLAG(int, max_queue_size, 256,
          "Default waiting requests per model and priority level before RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_queue_delay_us, 0,
          "Default dynamic-batching delay: how long the oldest request may wait for a fuller "
          "batch (config.pbtxt overrides)");
ABSL_FLAG(int, instances, 1, "Default model instances (worker threads) per model");
ABSL_FLAG(int, drain_seconds, 10, "On SIGINT/SIGTERM, time allowed for in-flight calls");
ABSL_FLAG(std::string, model_control, "none",
          "none: models are fixed at start; explicit: the KServe v2 repository API may load and "
          "unload models; poll: as explicit, and the repository directory is also polled for "
          "new, changed and removed models");
ABSL_FLAG(int64_t, explain_max_bytes, gatescope::kDefaultExplainMaxBytes,
          "Largest peak bytes one explain request may hold (maps of one layer, rollout state, "
          "returned maps; docs/explain.md); larger requests get RESOURCE_EXHAUSTED");
ABSL_FLAG(int, repository_poll_seconds, 15, "Polling interval with --model_control=poll");

namespace gatescope {
namespace {

absl::StatusOr<LoadedRunner> LoadTorchScript(const std::string& path) {
  auto loaded = TorchScriptRunner::Load(path);
  if (!loaded.ok()) return loaded.status();
  return LoadedRunner{std::move(loaded->runner), std::move(loaded->metadata_json)};
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
  if (!InstallSignalHandlers()) {
    GS_LOG(ERROR) << "cannot install signal handlers";
    return 1;
  }
  const std::string control = absl::GetFlag(FLAGS_model_control);
  if (control != "none" && control != "explicit" && control != "poll") {
    GS_LOG(ERROR) << "--model_control must be none, explicit or poll";
    return 1;
  }
  const int threads = absl::GetFlag(FLAGS_torch_threads);
  at::set_num_threads(
      threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));

  std::string ops = absl::GetFlag(FLAGS_ops_library);
  if (ops.empty()) {
    std::error_code ec;
    const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() /
                        "../models/ops/libgatescope_ops.so";
    if (!ec && std::filesystem::exists(beside)) ops = beside.lexically_normal().string();
  }
  if (!ops.empty()) {
    if (absl::Status st = LoadOpLibrary(ops); !st.ok()) {
      GS_LOG(ERROR) << st;
      return 1;
    }
    GS_LOG(INFO) << "loaded op library " << ops;
  }

  auto registry = std::make_shared<prometheus::Registry>();
  ServerMetrics metrics(registry);
  RepositoryOptions repo_options;
  repo_options.root = absl::GetFlag(FLAGS_model_repository);
  repo_options.defaults.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  repo_options.defaults.max_queue_size = absl::GetFlag(FLAGS_max_queue_size);
  repo_options.defaults.max_queue_delay = absl::Microseconds(absl::GetFlag(FLAGS_max_queue_delay_us));
  repo_options.defaults.instances = absl::GetFlag(FLAGS_instances);
  auto repository = ModelRepository::Load(repo_options, LoadTorchScript, &metrics);
  if (!repository.ok()) {
    GS_LOG(ERROR) << repository.status();
    return 1;
  }

  const std::string host = absl::GetFlag(FLAGS_host);
  std::unique_ptr<MetricsHttpServer> metrics_server;
  int metrics_port = -1;
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    auto started = MetricsHttpServer::Start(host, absl::GetFlag(FLAGS_metrics_port), registry,
                                            [&metrics] { metrics.RefreshProcessGauges(); });
    if (!started.ok()) {
      GS_LOG(ERROR) << started.status();
      return 1;
    }
    metrics_server = *std::move(started);
    metrics_port = metrics_server->port();
  }

  const int64_t explain_max_bytes = absl::GetFlag(FLAGS_explain_max_bytes);
  InferenceService service(repository->get(), explain_max_bytes);
  KServeService kserve(repository->get(), control == "explicit", explain_max_bytes);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", absl::GetFlag(FLAGS_grpc_port)),
                           grpc::InsecureServerCredentials(), &grpc_port);
  builder.SetMaxReceiveMessageSize(16 << 20);
  builder.RegisterService(&service);
  builder.RegisterService(&kserve);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || grpc_port == 0) {
    GS_LOG(ERROR) << "cannot listen on " << host << ":" << absl::GetFlag(FLAGS_grpc_port);
    return 1;
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  // Per model name: SERVING when the version answering unversioned requests is ready.
  // Overall: SERVING only when every model version loaded. Kept current as models change.
  ModelRepository* repo = repository->get();
  auto refresh_overall = [health, repo] {
    bool all_ready = true;
    for (const auto& model : repo->List()) all_ready &= model->ready();
    health->SetServingStatus("", all_ready);
  };
  for (const auto& model : repo->List()) {
    auto current = repo->Find(model->name, "");
    health->SetServingStatus(model->name, current.ok() && (*current)->ready());
  }
  refresh_overall();
  repo->SetStateListener([health, refresh_overall](const std::string& name, bool ready) {
    health->SetServingStatus(name, ready);
    refresh_overall();
  });
  std::atomic<bool> stop_polling{false};
  std::thread poller;
  if (absl::GetFlag(FLAGS_model_control) == "poll") {
    const int every = std::max(1, absl::GetFlag(FLAGS_repository_poll_seconds));
    poller = std::thread([repo, every, &stop_polling] {
      while (!stop_polling.load()) {
        for (int i = 0; i < every * 10 && !stop_polling.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (!stop_polling.load()) repo->Poll();
      }
    });
  }
  GS_LOG(INFO) << "serving gRPC on " << host << ":" << grpc_port << ", metrics on port "
               << metrics_port;
  if (const std::string pf = absl::GetFlag(FLAGS_port_file); !pf.empty()) {
    std::ofstream(pf + ".tmp") << "grpc=" << grpc_port << " metrics=" << metrics_port << "\n";
    std::rename((pf + ".tmp").c_str(), pf.c_str());
  }

  std::thread waiter([&] {
    const int sig = AwaitTerminationSignal();
    GS_LOG(INFO) << "signal " << sig << ": draining";
    health->Shutdown();  // every service reports NOT_SERVING
    service.BeginShutdown();
    kserve.BeginShutdown();
    stop_polling = true;
    if (poller.joinable()) poller.join();
    // Queued requests run at once (batching delays no longer apply) while gRPC waits for
    // the calls in flight, up to the drain limit.
    std::thread flush([repo] { repo->StopAll(); });
    server->Shutdown(std::chrono::system_clock::now() +
                     std::chrono::seconds(absl::GetFlag(FLAGS_drain_seconds)));
    flush.join();
  });
  server->Wait();
  waiter.join();
  (*repository)->StopAll();
  GS_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace
}  // namespace gatescope

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return gatescope::Run();
}
