#include "server/frontend/grpc/kserve_service.h"

#include "server/frontend/grpc/authorize.h"
#include "server/frontend/grpc/status_mapping.h"
#include "server/frontend/grpc/wire_message.h"

namespace gatescope {

namespace kv = ::inference;

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(st));
  return reactor;
}

FinishCall FinishReactor(grpc::ServerUnaryReactor* reactor) {
  return [reactor](absl::Status st) { reactor->Finish(ToGrpcStatus(st)); };
}

CallContext ContextOf(grpc::CallbackServerContext* ctx) {
  CallContext context;
  const auto deadline = ctx->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    context.deadline = absl::FromChrono(deadline);
  }
  context.cancelled = [ctx] { return ctx->IsCancelled(); };
  return context;
}

KServeService::KServeService(KServeCore* core, const AccessControl* access)
    : core_(core), access_(access) {
  // Every unary RPC parses its own request (wire_message.h).
  constexpr absl::string_view kService = "inference.GRPCInferenceService";
#define GATESCOPE_PARSE_OWN(Rpc) \
  MarkMethodCallback(MethodIndex(kService, #Rpc), ParsingUnaryHandler(this, &KServeService::Rpc));
  GATESCOPE_KSERVE_UNARY_RPCS(GATESCOPE_PARSE_OWN)
#undef GATESCOPE_PARSE_OWN
}

// Each unary RPC: its access category, then the core's answer.
#define GATESCOPE_AUTHORIZE(what)                                             \
  if (absl::Status st = Authorize(*ctx, access_, Access::what); !st.ok()) { \
    return FinishNow(ctx, st);                                                \
  }

grpc::ServerUnaryReactor* KServeService::ServerLive(Ctx* ctx, const kv::ServerLiveRequest*,
                                                    kv::ServerLiveResponse* response) {
  GATESCOPE_AUTHORIZE(kHealth)
  response->set_live(true);
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerReady(Ctx* ctx, const kv::ServerReadyRequest*,
                                                     kv::ServerReadyResponse* response) {
  GATESCOPE_AUTHORIZE(kHealth)
  response->set_ready(core_->ServerReady());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelReady(Ctx* ctx,
                                                    const kv::ModelReadyRequest* request,
                                                    kv::ModelReadyResponse* response) {
  GATESCOPE_AUTHORIZE(kHealth)
  response->set_ready(core_->ModelReady(request->name(), request->version()));
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(Ctx* ctx,
                                                        const kv::ServerMetadataRequest*,
                                                        kv::ServerMetadataResponse* response) {
  GATESCOPE_AUTHORIZE(kMetadata)
  core_->ServerMetadata(response);
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelMetadata(Ctx* ctx,
                                                       const kv::ModelMetadataRequest* request,
                                                       kv::ModelMetadataResponse* response) {
  GATESCOPE_AUTHORIZE(kMetadata)
  return FinishNow(ctx, core_->ModelMetadata(*request, response));
}

grpc::ServerUnaryReactor* KServeService::ModelConfig(Ctx* ctx,
                                                     const kv::ModelConfigRequest* request,
                                                     kv::ModelConfigResponse* response) {
  GATESCOPE_AUTHORIZE(kMetadata)
  return FinishNow(ctx, core_->ModelConfig(*request, response));
}

grpc::ServerUnaryReactor* KServeService::ModelStatistics(
    Ctx* ctx, const kv::ModelStatisticsRequest* request, kv::ModelStatisticsResponse* response) {
  GATESCOPE_AUTHORIZE(kMetadata)
  return FinishNow(ctx, core_->ModelStatistics(*request, response));
}

grpc::ServerUnaryReactor* KServeService::RepositoryIndex(
    Ctx* ctx, const kv::RepositoryIndexRequest* request, kv::RepositoryIndexResponse* response) {
  GATESCOPE_AUTHORIZE(kMetadata)
  core_->RepositoryIndex(*request, response);
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(Ctx* ctx,
                                                    const kv::ModelInferRequest* request,
                                                    kv::ModelInferResponse* response) {
  GATESCOPE_AUTHORIZE(kInference)
  auto* reactor = ctx->DefaultReactor();
  core_->ModelInfer(request, response, ContextOf(ctx), FinishReactor(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* KServeService::RepositoryModelLoad(
    Ctx* ctx, const kv::RepositoryModelLoadRequest* request, kv::RepositoryModelLoadResponse*) {
  GATESCOPE_AUTHORIZE(kModelControl)
  auto* reactor = ctx->DefaultReactor();
  core_->RepositoryModelLoad(*request, FinishReactor(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* KServeService::RepositoryModelUnload(
    Ctx* ctx, const kv::RepositoryModelUnloadRequest* request,
    kv::RepositoryModelUnloadResponse*) {
  GATESCOPE_AUTHORIZE(kModelControl)
  auto* reactor = ctx->DefaultReactor();
  core_->RepositoryModelUnload(*request, FinishReactor(reactor));
  return reactor;
}

#undef GATESCOPE_AUTHORIZE

}  // namespace gatescope
