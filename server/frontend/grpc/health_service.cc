#include "server/frontend/grpc/health_service.h"

#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/frontend/grpc/authorize.h"
#include "server/frontend/grpc/status_mapping.h"
#include "server/frontend/grpc/wire_message.h"
#include "server/repository/repository_names.h"

namespace gatescope {

namespace hv1 = ::grpc::health::v1;

// One Watch stream. Every event (a status change, a write done, a cancellation) ends in
// Step(), which decides one action under mu_ and takes it with no lock held: so one thread
// at a time starts a write (it sets writing_), and the stream is finished exactly once
// (whoever sets finished_). Deleted once gRPC is done with it and no notification pins it
// (HealthService::Forget / Notify, under the service's mutex).
class HealthService::Watcher : public grpc::ServerWriteReactor<hv1::HealthCheckResponse> {
 public:
  Watcher(HealthService* service, std::string name) : service_(service), name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // The status as of `generation` (later generations win, whatever order notifications
  // arrive in); with `finish`, the stream ends once it is sent. Takes no service lock.
  void Update(ServingStatus status, uint64_t generation, bool finish) {
    {
      absl::MutexLock lock(&mu_);
      if (generation >= generation_) {
        generation_ = generation;
        latest_ = status;
      }
      finish_requested_ |= finish;
    }
    Step();
  }

  // Ends the stream now with `status` (a refused call). Before gRPC has the reactor.
  void Refuse(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(status);
  }

  // Guarded by the service's mu_: notifications holding this watcher, and whether gRPC is
  // done with it.
  int pins = 0;
  bool done = false;

 private:
  enum class Action { kNone, kWrite, kWriteAndFinish, kFinish, kFinishCancelled };

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      cancelled_ |= !ok;
    }
    Step();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    Step();
  }

  void OnDone() override { service_->Forget(this); }

  Action Decide() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return Action::kNone;
    const bool changed = !sent_ || *sent_ != latest_;
    if (cancelled_) {
      if (writing_) return Action::kNone;  // its OnWriteDone comes back here
      finished_ = true;
      return Action::kFinishCancelled;
    }
    // A write in flight completes (its OnWriteDone comes back here) before the last status
    // and the end are sent. Messages are a few bytes and coalesced, so only a client that
    // left thousands of them unread could hold a drain, and then for at most its deadline.
    if (writing_) return Action::kNone;
    if (finish_requested_) {
      finished_ = true;
      if (!changed) return Action::kFinish;
      sent_ = latest_;
      response_.set_status(latest_);
      return Action::kWriteAndFinish;
    }
    if (!changed) return Action::kNone;
    sent_ = latest_;
    response_.set_status(latest_);
    writing_ = true;
    return Action::kWrite;
  }

  void Step() {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      action = Decide();
    }
    switch (action) {
      case Action::kNone:
        return;
      case Action::kWrite:
        return StartWrite(&response_);
      case Action::kWriteAndFinish:
        return StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      case Action::kFinish:
        return Finish(grpc::Status::OK);
      case Action::kFinishCancelled:
        return Finish(grpc::Status::CANCELLED);
    }
  }

  HealthService* const service_;
  const std::string name_;
  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  ServingStatus latest_ ABSL_GUARDED_BY(mu_) = hv1::HealthCheckResponse::SERVICE_UNKNOWN;
  std::optional<ServingStatus> sent_ ABSL_GUARDED_BY(mu_);  // the last status written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // The message in flight; changed only when no write is (Decide under mu_).
  hv1::HealthCheckResponse response_;
};

HealthService::HealthService(const AccessControl* access) : access_(access) {
  constexpr absl::string_view kService = "grpc.health.v1.Health";
  MarkMethodCallback(MethodIndex(kService, "Check"),
                     ParsingUnaryHandler(this, &HealthService::Check));
  MarkMethodCallback(MethodIndex(kService, "Watch"),
                     ParsingServerStreamingHandler(this, &HealthService::Watch));
}

HealthService::~HealthService() {
  absl::MutexLock lock(&mu_);
  for (Watcher* watcher : watchers_) delete watcher;  // none once gRPC has shut down
}

HealthService::ServingStatus HealthService::StatusLocked(const std::string& service) const {
  auto it = statuses_.find(service);
  return it == statuses_.end() ? hv1::HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  const ServingStatus status =
      serving ? hv1::HealthCheckResponse::SERVING : hv1::HealthCheckResponse::NOT_SERVING;
  std::set<Watcher*> pinned;
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    statuses_[service] = status;
    generation = ++generation_;
    for (Watcher* watcher : watchers_) {
      if (watcher->name() != service) continue;
      ++watcher->pins;
      pinned.insert(watcher);
    }
  }
  Notify(pinned, status, generation, /*finish=*/false);
}

void HealthService::Shutdown() {
  std::set<Watcher*> pinned;
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [name, status] : statuses_) status = hv1::HealthCheckResponse::NOT_SERVING;
    generation = ++generation_;
    for (Watcher* watcher : watchers_) {
      ++watcher->pins;
      pinned.insert(watcher);
    }
  }
  Notify(pinned, hv1::HealthCheckResponse::NOT_SERVING, generation, /*finish=*/true);
}

void HealthService::Notify(const std::set<Watcher*>& watchers, ServingStatus status,
                           uint64_t generation, bool finish) {
  for (Watcher* watcher : watchers) watcher->Update(status, generation, finish);
  absl::MutexLock lock(&mu_);
  for (Watcher* watcher : watchers) {
    if (--watcher->pins == 0 && watcher->done) delete watcher;
  }
}

void HealthService::Forget(Watcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
  watcher->done = true;
  if (watcher->pins == 0) delete watcher;
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const hv1::HealthCheckRequest* request,
                                               hv1::HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status st = Authorize(*context, access_, Access::kHealth); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  ServingStatus status;
  {
    absl::MutexLock lock(&mu_);
    status = StatusLocked(request->service());
  }
  if (status == hv1::HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(ToGrpcStatus(absl::NotFoundError(
        absl::StrCat("unknown service ", QuoteName(request->service())))));
    return reactor;
  }
  response->set_status(status);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<hv1::HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const hv1::HealthCheckRequest* request) {
  auto* watcher = new Watcher(this, request->service());
  if (absl::Status st = Authorize(*context, access_, Access::kHealth); !st.ok()) {
    watcher->Refuse(ToGrpcStatus(st));  // OnDone deletes it
    return watcher;
  }
  ServingStatus status;
  uint64_t generation;
  bool finish;
  {
    absl::MutexLock lock(&mu_);
    watchers_.insert(watcher);
    ++watcher->pins;
    status = StatusLocked(request->service());
    generation = generation_;
    finish = shut_down_;
  }
  Notify({watcher}, status, generation, finish);
  return watcher;
}

}  // namespace gatescope
