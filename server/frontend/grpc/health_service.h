// grpc.health.v1.Health (the standard health-checking protocol), served by gatescope instead
// of gRPC's built-in service so that it answers to the server's access control like every
// other call: category health, open without a token by default (--auth_exempt), since
// Kubernetes gRPC probes send none. Statuses are kept per service name ("" is the whole
// server). As the protocol defines: Check answers NOT_FOUND for a name never set; Watch sends
// the current status (SERVICE_UNKNOWN for such a name) at once and then every change.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/auth/access_control.h"

namespace gatescope {

class HealthService final : public ::grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = ::grpc::health::v1::HealthCheckResponse::ServingStatus;

  // `access` (null: every call allowed) is not owned and outlives the gRPC server.
  explicit HealthService(const AccessControl* access = nullptr);
  // The gRPC server must have shut down (every Watch ended) before this runs.
  ~HealthService() override;

  // Sets `service`'s status and tells its watchers. Ignored after Shutdown. Thread-safe;
  // never blocks on a client.
  void SetServingStatus(const std::string& service, bool serving);
  // From now on every name is NOT_SERVING and later sets are ignored; open Watch streams get
  // NOT_SERVING and are then finished (OK) at once, so a drain does not wait for them (unless
  // a client left its flow-control window full). Thread-safe, idempotent.
  void Shutdown();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const ::grpc::health::v1::HealthCheckRequest* request,
                                  ::grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<::grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const ::grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;
  // Status of `service` now; SERVICE_UNKNOWN for a name never set.
  ServingStatus StatusLocked(const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells `watchers` (pinned under mu_ by the caller) `status`, with no lock held, then
  // unpins them (a watcher whose stream ended meanwhile is deleted here).
  void Notify(const std::set<Watcher*>& watchers, ServingStatus status, uint64_t generation,
              bool finish);
  // Called by a watcher's OnDone: forgets it, deleting it unless a notification pins it.
  void Forget(Watcher* watcher);

  const AccessControl* const access_;  // may be null
  absl::Mutex mu_;
  std::map<std::string, ServingStatus> statuses_ ABSL_GUARDED_BY(mu_);
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // counts status changes
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gatescope
