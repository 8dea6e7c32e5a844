#include "server/frontend/grpc/kserve_service.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/api/infer_results.h"
#include "server/api/request_scheduling.h"
#include "server/frontend/grpc/authorize.h"
#include "server/frontend/grpc/model_call.h"
#include "server/frontend/grpc/status_mapping.h"
#include "server/frontend/grpc/wire_message.h"

namespace gatescope {

namespace kv = ::inference;

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(st));
  return reactor;
}

KServeService::KServeService(ModelRepository* repository, bool explicit_control,
                             const Clock* clock, const AccessControl* access)
    : repository_(repository), model_control_(explicit_control), clock_(clock), access_(access) {
  // Every RPC parses its own request (wire_message.h).
  constexpr absl::string_view kService = "inference.GRPCInferenceService";
#define GATESCOPE_PARSE_OWN(Rpc) \
  MarkMethodCallback(MethodIndex(kService, #Rpc), ParsingUnaryHandler(this, &KServeService::Rpc));
  GATESCOPE_KSERVE_UNARY_RPCS(GATESCOPE_PARSE_OWN)
#undef GATESCOPE_PARSE_OWN
}

KServeService::~KServeService() = default;

grpc::ServerUnaryReactor* KServeService::ServerLive(Ctx* ctx, const kv::ServerLiveRequest*,
                                                    kv::ServerLiveResponse* response) {
  if (absl::Status st = Authorize(*ctx, access_, Access::kHealth); !st.ok()) {
    return FinishNow(ctx, st);
  }
  response->set_live(true);
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerReady(Ctx* ctx, const kv::ServerReadyRequest*,
                                                     kv::ServerReadyResponse* response) {
  if (absl::Status st = Authorize(*ctx, access_, Access::kHealth); !st.ok()) {
    return FinishNow(ctx, st);
  }
  response->set_ready(!shutting_down_.load() && repository_->ServesEveryModel());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelReady(Ctx* ctx,
                                                    const kv::ModelReadyRequest* request,
                                                    kv::ModelReadyResponse* response) {
  if (absl::Status st = Authorize(*ctx, access_, Access::kHealth); !st.ok()) {
    return FinishNow(ctx, st);
  }
  auto model = repository_->Find(request->name(), request->version());
  response->set_ready(model.ok() && (*model)->ready() && !shutting_down_.load());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(Ctx* ctx,
                                                        const kv::ServerMetadataRequest*,
                                                        kv::ServerMetadataResponse* response) {
  if (absl::Status st = Authorize(*ctx, access_, Access::kMetadata); !st.ok()) {
    return FinishNow(ctx, st);
  }
  response->set_name("gatescope");
  response->set_version("0.1.0");
  for (const char* ext : {"model_repository", "model_configuration", "statistics"}) {
    response->add_extensions(ext);
  }
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(Ctx* ctx,
                                                    const kv::ModelInferRequest* request,
                                                    kv::ModelInferResponse* response) {
  if (absl::Status st = Authorize(*ctx, access_, Access::kInference); !st.ok()) {
    return FinishNow(ctx, st);
  }
  auto* reactor = ctx->DefaultReactor();
  auto call = BeginModelCall(reactor, *repository_, request->model_name(),
                             request->model_version(), shutting_down_.load(), clock_);
  if (!call) return reactor;
  absl::StatusOr<Scheduling> scheduling = SchedulingOf(*request);
  if (!scheduling.ok()) {
    call->Finish(scheduling.status());
    return reactor;
  }
  response->set_model_name(call->model->name);
  response->set_model_version(call->model->version);
  response->set_id(request->id());
  auto results = std::make_shared<InferResults>(request, response, call->Done());
  auto jobs = call->task().Infer(*request, results);
  const int max_batch = call->model->plan.batching.max_batch_size;
  if (jobs.ok() && static_cast<int64_t>(jobs->size()) > max_batch) {
    jobs = absl::InvalidArgumentError(absl::StrCat("ModelInfer: a batch of ", jobs->size(),
                                                   " examples exceeds the model's max_batch_size ",
                                                   max_batch));
  }
  if (!jobs.ok()) {
    call->Finish(jobs.status());
    return reactor;
  }
  // Once an example has failed, the call's answer is that error: queued examples are
  // refused (as cancelled) rather than run.
  auto abandoned = [results] { return results->failed(); };
  for (size_t i = 0; i < jobs->size(); ++i) {
    absl::Status st = Submit(*call, ctx, std::move((*jobs)[i]), *scheduling, abandoned);
    if (!st.ok()) {
      // Job i was refused; the rest never run, and the call still finishes exactly once.
      for (size_t j = i + 1; j < jobs->size(); ++j) (*jobs)[j]->Refuse(st);
      break;
    }
  }
  return reactor;
}

void KServeService::RunControl(Reactor* reactor, std::function<absl::Status()> work) {
  const bool queued = control_.Submit([reactor, work = std::move(work)](bool run) {
    absl::Status st = absl::UnavailableError("server is shutting down");
    if (run) {
      try {
        st = work();
      } catch (const std::exception& e) {
        st = absl::InternalError(e.what());
      }
    }
    reactor->Finish(ToGrpcStatus(st));
  });
  if (!queued) {
    reactor->Finish(ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "too many model control calls waiting (", kMaxWaitingControlCalls, "); retry later"))));
  }
}

grpc::ServerUnaryReactor* KServeService::Control(Ctx* ctx,
                                                 std::function<absl::Status()> work) {
  if (!model_control_) {
    return FinishNow(ctx, absl::FailedPreconditionError(
                         "explicit model control is off (start the server with "
                         "--model_control=explicit; with polling the repository directory "
                         "decides)"));
  }
  auto* reactor = ctx->DefaultReactor();
  RunControl(reactor, std::move(work));
  return reactor;
}

grpc::ServerUnaryReactor* KServeService::RepositoryModelLoad(
    Ctx* ctx, const kv::RepositoryModelLoadRequest* request,
    kv::RepositoryModelLoadResponse*) {
  if (absl::Status st = Authorize(*ctx, access_, Access::kModelControl); !st.ok()) {
    return FinishNow(ctx, st);
  }
  return Control(ctx, [this, name = request->model_name()] {
    return repository_->LoadModel(name);
  });
}

grpc::ServerUnaryReactor* KServeService::RepositoryModelUnload(
    Ctx* ctx, const kv::RepositoryModelUnloadRequest* request,
    kv::RepositoryModelUnloadResponse*) {
  if (absl::Status st = Authorize(*ctx, access_, Access::kModelControl); !st.ok()) {
    return FinishNow(ctx, st);
  }
  return Control(ctx, [this, name = request->model_name()] {
    return repository_->UnloadModel(name);
  });
}

}  // namespace gatescope

