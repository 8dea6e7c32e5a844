// KServe v2 / Open Inference Protocol (inference.GRPCInferenceService) over the callback
// API. Inference goes through the same tasks and schedulers as gatescope.v1; repository
// load and unload run on their own threads so no gRPC thread blocks. Model information
// (metadata, config, statistics, index) is in kserve_model_info.cc.
#pragma once

#include <cstdint>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/repository/model_repository.h"

namespace gatescope {

// Finishes the call's default reactor with `status` at once.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status);

class KServeService final : public ::inference::GRPCInferenceService::CallbackService {
 public:
  // `repository` is not owned and must outlive this service. `explicit_control` allows
  // RepositoryModelLoad/Unload (not with repository polling, which owns the model set).
  KServeService(ModelRepository* repository, bool explicit_control);
  // Joins repository-control threads still running.
  ~KServeService() override;

  // After this, ServerReady is false and new ModelInfer calls get UNAVAILABLE.
  void BeginShutdown() { shutting_down_.store(true); }

  using Reactor = grpc::ServerUnaryReactor;
  using Ctx = grpc::CallbackServerContext;
  Reactor* ServerLive(Ctx*, const ::inference::ServerLiveRequest*,
                      ::inference::ServerLiveResponse*) override;
  Reactor* ServerReady(Ctx*, const ::inference::ServerReadyRequest*,
                       ::inference::ServerReadyResponse*) override;
  Reactor* ModelReady(Ctx*, const ::inference::ModelReadyRequest*,
                      ::inference::ModelReadyResponse*) override;
  Reactor* ServerMetadata(Ctx*, const ::inference::ServerMetadataRequest*,
                          ::inference::ServerMetadataResponse*) override;
  Reactor* ModelMetadata(Ctx*, const ::inference::ModelMetadataRequest*,
                         ::inference::ModelMetadataResponse*) override;
  Reactor* ModelInfer(Ctx*, const ::inference::ModelInferRequest*,
                      ::inference::ModelInferResponse*) override;
  Reactor* ModelConfig(Ctx*, const ::inference::ModelConfigRequest*,
                       ::inference::ModelConfigResponse*) override;
  Reactor* ModelStatistics(Ctx*, const ::inference::ModelStatisticsRequest*,
                           ::inference::ModelStatisticsResponse*) override;
  Reactor* RepositoryIndex(Ctx*, const ::inference::RepositoryIndexRequest*,
                           ::inference::RepositoryIndexResponse*) override;
  Reactor* RepositoryModelLoad(Ctx*, const ::inference::RepositoryModelLoadRequest*,
                               ::inference::RepositoryModelLoadResponse*) override;
  Reactor* RepositoryModelUnload(Ctx*, const ::inference::RepositoryModelUnloadRequest*,
                                 ::inference::RepositoryModelUnloadResponse*) override;

 private:
  // RepositoryModelLoad/Unload: FAILED_PRECONDITION without explicit control, otherwise
  // `work` on a control thread.
  Reactor* Control(Ctx* ctx, std::function<absl::Status()> work);
  // Runs `work` on a tracked thread and finishes `reactor` with its status. Threads that
  // have finished are joined on the next call.
  void RunControl(Reactor* reactor, std::function<absl::Status()> work);

  struct ControlThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  ModelRepository* const repository_;
  const bool model_control_;
  std::atomic<bool> shutting_down_{false};
  absl::Mutex threads_mu_;
  std::vector<ControlThread> threads_ ABSL_GUARDED_BY(threads_mu_);
};

}  // namespace gatescope
