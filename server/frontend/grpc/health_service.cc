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

// One Watch stream: at most one write in flight; while it is, newer statuses wait and only
// the latest is sent next. Deleted once gRPC is done with it and no notification pins it
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
      if (finished_) return;
      if (generation >= generation_) {
        generation_ = generation;
        latest_ = status;
      }
      finish_requested_ |= finish;
      if (writing_) return;  // OnWriteDone sends the latest
    }
    Continue(/*write_ok=*/true);
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
  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
    Continue(ok);
  }

  void OnCancel() override {
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      // With a write in flight, its failed OnWriteDone finishes the stream.
      finish = !finished_ && !writing_;
      finished_ |= finish;
    }
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override { service_->Forget(this); }

  // Sends the latest status if it differs from the last one sent; otherwise finishes when
  // asked to. StartWrite and Finish run with no lock held.
  void Continue(bool write_ok) {
    bool write = false;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (!write_ok) {
        finish = true;
      } else if (!sent_ || *sent_ != latest_) {
        sent_ = latest_;
        response_.set_status(latest_);
        writing_ = write = true;
      } else {
        finish = finish_requested_;
      }
      finished_ |= finish;
    }
    if (write) StartWrite(&response_);
    if (finish) Finish(write_ok ? grpc::Status::OK : grpc::Status::CANCELLED);
  }

  HealthService* const service_;
  const std::string name_;
  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  ServingStatus latest_ ABSL_GUARDED_BY(mu_) = hv1::HealthCheckResponse::SERVICE_UNKNOWN;
  std::optional<ServingStatus> sent_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  hv1::HealthCheckResponse response_;  // the write in flight reads it; changed only between
};

HealthService::HealthService(const AccessControl* access) : access_(access) {
  constexpr absl::string_view kService = "grpc.health.v1.Health";
  MarkMethodCallback(MethodIndex(kService, "Check"),
                     ParsingUnaryHandler(this, &HealthService::Check));
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
