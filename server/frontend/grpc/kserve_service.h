// KServe v2 / Open Inference Protocol (inference.GRPCInferenceService) over gRPC's callback
// API: each unary RPC checks the caller's token and hands its messages to KServeCore
// (frontend/core/kserve_core.h), which answers for every transport; ModelStreamInfer is a
// bidirectional stream of ModelInfer calls (kserve_stream.cc).
#pragma once

#include "inference/grpc_service.grpc.pb.h"
#include "server/auth/access_control.h"
#include "server/frontend/core/kserve_core.h"

// The unary RPCs of inference.GRPCInferenceService as declared in proto/inference, as an
// X-macro: X(Rpc) for each.
#define GATESCOPE_KSERVE_UNARY_RPCS(X)                                                 \
  X(ServerLive) X(ServerReady) X(ModelReady) X(ServerMetadata) X(ModelMetadata)        \
  X(ModelInfer) X(ModelConfig) X(ModelStatistics) X(RepositoryIndex)                   \
  X(RepositoryModelLoad) X(RepositoryModelUnload)

namespace gatescope {

// Finishes the call's default reactor with `status` at once.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status);

// The core's FinishCall for a unary call: finishes `reactor` with the status.
FinishCall FinishReactor(grpc::ServerUnaryReactor* reactor);

class KServeService final : public ::inference::GRPCInferenceService::CallbackService {
 public:
  // Requests of one ModelStreamInfer running or answered but not yet taken by the client:
  // further requests are read only as earlier answers are written (flow control holds
  // the client back).
  static constexpr int kMaxStreamRequestsInFlight = 64;

  // `core` and `access` (null: every call allowed) are not owned and must outlive the gRPC
  // server.
  KServeService(KServeCore* core, const AccessControl* access = nullptr);

  using Reactor = grpc::ServerUnaryReactor;
  using Ctx = grpc::CallbackServerContext;
  // Every unary RPC of inference.GRPCInferenceService, declared from one list
  // (GATESCOPE_KSERVE_UNARY_RPCS, above):
  // Reactor* <Rpc>(Ctx*, const inference::<Rpc>Request*, inference::<Rpc>Response*).
#define GATESCOPE_KSERVE_RPC(Rpc) \
  Reactor* Rpc(Ctx*, const ::inference::Rpc##Request*, ::inference::Rpc##Response*) override;
  GATESCOPE_KSERVE_UNARY_RPCS(GATESCOPE_KSERVE_RPC)
#undef GATESCOPE_KSERVE_RPC

  grpc::ServerBidiReactor<::inference::ModelInferRequest, ::inference::ModelStreamInferResponse>*
  ModelStreamInfer(Ctx* ctx) override;

 private:
  KServeCore* const core_;
  const AccessControl* const access_;  // may be null
};

// The call's deadline and cancellation, for the core.
CallContext ContextOf(grpc::CallbackServerContext* ctx);

}  // namespace gatescope
