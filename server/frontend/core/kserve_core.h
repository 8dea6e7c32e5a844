// The KServe v2 / Open Inference Protocol calls as the server answers them, whatever the
// transport: the gRPC service (frontend/grpc) and the REST routes (frontend/http) are thin
// adapters over this class, so both protocols give the same answers and statuses.
// Inference goes through the same tasks and schedulers as gatescope.v1; repository load and
// unload run on one control thread so no transport thread blocks. No gRPC, no HTTP.
#pragma once

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "inference/grpc_service.pb.h"
#include "server/common/clock.h"
#include "server/frontend/core/control_queue.h"
#include "server/frontend/core/model_call.h"
#include "server/repository/model_repository.h"

namespace gatescope {

class KServeCore {
 public:
  static constexpr char kServerName[] = "gatescope";
  static constexpr char kServerVersion[] = "0.1.0";

  // `repository` and `clock` (call latencies) are not owned and must outlive this.
  // `explicit_control` allows RepositoryModelLoad/Unload (not with repository polling,
  // which owns the model set).
  KServeCore(ModelRepository* repository, bool explicit_control, const Clock* clock);
  // Answers control calls still waiting with UNAVAILABLE; joins the control thread.
  ~KServeCore() = default;

  // After this, ServerReady and ModelReady are false and new ModelInfer calls get
  // UNAVAILABLE. Thread-safe.
  void BeginShutdown() { shutting_down_.store(true); }
  bool shutting_down() const { return shutting_down_.load(); }

  // Immediate answers: any thread, never wait for a model.
  bool ServerReady() const;
  bool ModelReady(const std::string& name, const std::string& version) const;
  void ServerMetadata(::inference::ServerMetadataResponse* response) const;
  // NOT_FOUND for an unknown model or version, UNAVAILABLE for one that is not ready.
  absl::Status ModelMetadata(const ::inference::ModelMetadataRequest& request,
                             ::inference::ModelMetadataResponse* response) const;
  absl::Status ModelConfig(const ::inference::ModelConfigRequest& request,
                           ::inference::ModelConfigResponse* response) const;
  // Every model (empty name), or one model's versions; NOT_FOUND for an unknown one.
  absl::Status ModelStatistics(const ::inference::ModelStatisticsRequest& request,
                               ::inference::ModelStatisticsResponse* response) const;
  void RepositoryIndex(const ::inference::RepositoryIndexRequest& request,
                       ::inference::RepositoryIndexResponse* response) const;

  // Queues the request's examples (one job each; more than the model's max_batch_size:
  // INVALID_ARGUMENT) and returns at once; `finish` runs once, when `response` is complete
  // or with the first error. `request` and `response` must outlive `finish`.
  void ModelInfer(const ::inference::ModelInferRequest* request,
                  ::inference::ModelInferResponse* response, const CallContext& context,
                  FinishCall finish) const;

  // FAILED_PRECONDITION without explicit control; INVALID_ARGUMENT for configuration or
  // file overrides (a model's files come from the repository); RESOURCE_EXHAUSTED when
  // kMaxWaitingControlCalls already wait. Otherwise runs on the control thread and
  // `finish` gets the outcome.
  void RepositoryModelLoad(const ::inference::RepositoryModelLoadRequest& request,
                           FinishCall finish);
  void RepositoryModelUnload(const ::inference::RepositoryModelUnloadRequest& request,
                             FinishCall finish);

 private:
  void Control(std::function<absl::Status()> work, FinishCall finish);

  static constexpr size_t kMaxWaitingControlCalls = 16;

  ModelRepository* const repository_;
  const bool model_control_;
  const Clock* const clock_;
  std::atomic<bool> shutting_down_{false};
  ControlQueue control_{kMaxWaitingControlCalls};
};

}  // namespace gatescope
