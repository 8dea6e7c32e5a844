// What every inference RPC does around a model: look it up, check it can take work,
// attach the call's deadline and cancellation to work items, and finish exactly once
// while recording the outcome. Shared by the gatescope.v1 and KServe v2 services.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "server/repository/model_repository.h"

namespace gatescope {

// One call on one model. Copyable; the reactor and model outlive every copy's use.
struct ModelCall {
  grpc::ServerUnaryReactor* reactor;
  std::shared_ptr<ServedModel> model;
  std::chrono::steady_clock::time_point start;

  // Records the outcome in the model's metrics and finishes the reactor. Call once.
  void Finish(const absl::Status& status) const;
};

// Finds the model and checks it can take work now. On failure `reactor` (the call's one
// default reactor) is already finished and nullopt comes back.
std::optional<ModelCall> BeginModelCall(grpc::ServerUnaryReactor* reactor,
                                        const ModelRepository& repository,
                                        const std::string& name, const std::string& version,
                                        bool shutting_down);

// Makes `item` honour the call's gRPC deadline and cancellation. `context` must outlive
// the item's completion (it does: the call is finished only from `done`).
void AttachCallContext(grpc::CallbackServerContext* context, WorkItem& item);

// AttachCallContext, then queues `item` on the call's model; if the queue refuses it
// (RESOURCE_EXHAUSTED, UNAVAILABLE) the call is finished with that status at once.
void Submit(const ModelCall& call, grpc::CallbackServerContext* context, WorkItem item);

}  // namespace gatescope
