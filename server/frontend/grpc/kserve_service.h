// KServe v2 / Open Inference Protocol (inference.GRPCInferenceService) over the callback
// API. Inference goes through the same tasks and schedulers as gatescope.v1; repository
// load and unload run on their own threads so no gRPC thread blocks. Model information
// (metadata, config, statistics, index) is in kserve_model_info.cc.
#pragma once

#include <cstdint>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/common/clock.h"
#include "server/frontend/grpc/control_queue.h"
#include "server/repository/model_repository.h"

// The RPCs of inference.GRPCInferenceService as declared in proto/inference (all unary; the
// streaming ModelStreamInfer is not declared there), as an X-macro: X(Rpc) for each.
#define GATESCOPE_KSERVE_UNARY_RPCS(X)                                                 \
  X(ServerLive) X(ServerReady) X(ModelReady) X(ServerMetadata) X(ModelMetadata)        \
  X(ModelInfer) X(ModelConfig) X(ModelStatistics) X(RepositoryIndex)                   \
  X(RepositoryModelLoad) X(RepositoryModelUnload)

namespace gatescope {

// Finishes the call's default reactor with `status` at once.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status);

class KServeService final : public ::inference::GRPCInferenceService::CallbackService {
 public:
  // `repository`, `clock` (call latencies) and `access` (null: every call allowed) are not
  // owned and must outlive this service. `explicit_control` allows RepositoryModelLoad/Unload
  // (not with repository polling, which owns the model set).
  KServeService(ModelRepository* repository, bool explicit_control, const Clock* clock,
                const AccessControl* access = nullptr);
  // Joins repository-control threads still running.
  ~KServeService() override;

  // After this, ServerReady is false and new ModelInfer calls get UNAVAILABLE.
  void BeginShutdown() { shutting_down_.store(true); }

  using Reactor = grpc::ServerUnaryReactor;
  using Ctx = grpc::CallbackServerContext;
  // Every unary RPC of inference.GRPCInferenceService, declared from one list
  // (GATESCOPE_KSERVE_UNARY_RPCS, above):
  // Reactor* <Rpc>(Ctx*, const inference::<Rpc>Request*, inference::<Rpc>Response*).
#define GATESCOPE_KSERVE_RPC(Rpc) \
  Reactor* Rpc(Ctx*, const ::inference::Rpc##Request*, ::inference::Rpc##Response*) override;
  GATESCOPE_KSERVE_UNARY_RPCS(GATESCOPE_KSERVE_RPC)
#undef GATESCOPE_KSERVE_RPC

 private:
  // Answers a request about one ready model (`request.name()` at `request.version()`):
  // NOT_FOUND, or UNAVAILABLE when it is not ready; else `fill(model)` writes the response.
  template <typename Request, typename Fill>
  Reactor* AboutReadyModel(Ctx* ctx, const Request& request, Fill fill) const;
  // RepositoryModelLoad/Unload: FAILED_PRECONDITION without explicit control, otherwise
  // `work` on a control thread.
  Reactor* Control(Ctx* ctx, std::function<absl::Status()> work);
  // Queues `work` on the control queue and finishes `reactor` with its status;
  // RESOURCE_EXHAUSTED when kMaxWaitingControlCalls already wait.
  void RunControl(Reactor* reactor, std::function<absl::Status()> work);

  static constexpr size_t kMaxWaitingControlCalls = 16;

  ModelRepository* const repository_;
  const bool model_control_;
  const Clock* const clock_;
  const AccessControl* const access_;  // may be null
  std::atomic<bool> shutting_down_{false};
  ControlQueue control_{kMaxWaitingControlCalls};
};

}  // namespace gatescope
