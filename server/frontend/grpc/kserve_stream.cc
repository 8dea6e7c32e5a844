// ModelStreamInfer: a bidirectional stream of ModelInfer calls, as Triton's streaming
// clients use it. Each request read becomes one KServeCore::ModelInfer; each is answered on
// the stream when it completes (completion order; clients match by id), a failed one with
// error_message set (and its id and model in infer_response) while the stream goes on.
// The stream ends OK once the client has closed its side and every request is answered.
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/frontend/grpc/authorize.h"
#include "server/frontend/grpc/kserve_service.h"
#include "server/frontend/grpc/status_mapping.h"

namespace gatescope {
namespace {

namespace kv = ::inference;

// Owns itself: deleted in OnDone, which gRPC calls once Finish has been called and every
// read and write has ended; Finish is called only once every ModelInfer has answered, so no
// job's callback can reach a deleted stream. Reads are one at a time (gRPC's rule), as are
// writes (queued here); callbacks arrive on gRPC threads and on model workers, and `mu_`
// orders them. Calls into gRPC are made outside `mu_` (Actions).
class InferStream final
    : public grpc::ServerBidiReactor<kv::ModelInferRequest, kv::ModelStreamInferResponse> {
 public:
  InferStream(KServeCore* core, grpc::CallbackServerContext* ctx, const AccessControl* access)
      : core_(core), context_(ContextOf(ctx)) {
    if (absl::Status st = Authorize(*ctx, access, Access::kInference); !st.ok()) {
      Finish(ToGrpcStatus(st));
      return;
    }
    reading_ = true;
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side, or the stream broke
      Actions next;
      {
        absl::MutexLock lock(&mu_);
        reading_ = false;
        reads_done_ = true;
        next = NextLocked();
      }
      return Perform(next);
    }
    auto pending = std::make_shared<Pending>();
    pending->request = std::move(incoming_);
    incoming_.Clear();
    bool read_more;
    {
      absl::MutexLock lock(&mu_);
      ++in_flight_;
      read_more = RoomLocked();
      reading_ = read_more;
    }
    core_->ModelInfer(&pending->request, pending->reply.mutable_infer_response(), context_,
                      [this, pending](absl::Status st) { Answer(pending, st); });
    if (read_more) StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    Actions next;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      writes_.pop_front();
      if (!ok) broken_ = true;  // the client has gone: answers still come, unsent
      next = NextLocked();
      next.read = ResumeReadingLocked();
    }
    Perform(next);
  }

  void OnDone() override { delete this; }

 private:
  struct Pending {
    kv::ModelInferRequest request;
    kv::ModelStreamInferResponse reply;
  };

  // What to ask of gRPC once `mu_` is released (gRPC may run a reaction on the calling
  // thread).
  struct Actions {
    const kv::ModelStreamInferResponse* write = nullptr;
    bool read = false;
    bool finish = false;
  };

  // A request has been answered: queue its reply; read again if reading had paused.
  void Answer(const std::shared_ptr<Pending>& pending, const absl::Status& status) {
    kv::ModelStreamInferResponse& reply = pending->reply;
    if (!status.ok()) {
      // As Triton: the message alone (the stream carries no per-request status code).
      reply.set_error_message(std::string(status.message()));
      kv::ModelInferResponse* answer = reply.mutable_infer_response();
      answer->clear_outputs();
      answer->clear_raw_output_contents();
      answer->set_id(pending->request.id());
      answer->set_model_name(pending->request.model_name());
      answer->set_model_version(pending->request.model_version());
    }
    Actions next;
    {
      absl::MutexLock lock(&mu_);
      --in_flight_;
      if (!broken_) writes_.push_back(std::move(reply));
      next.read = ResumeReadingLocked();
      const Actions more = NextLocked();
      next.write = more.write;
      next.finish = more.finish;
    }
    Perform(next);
  }

  // Whether another request may be read: requests running and replies not yet taken by the
  // client together stay under the window, so a client that never reads cannot make the
  // server hold more than that many replies.
  bool RoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ + static_cast<int>(writes_.size()) <
           KServeService::kMaxStreamRequestsInFlight;
  }

  // True (and reading again) when reading had paused for the window and there is room now,
  // or the stream broke (the read then fails at once and the stream can end).
  bool ResumeReadingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reading_ || reads_done_ || (!broken_ && !RoomLocked())) return false;
    reading_ = true;
    return true;
  }

  // The next write (the queue's front, which stays put until its OnWriteDone) or Finish.
  Actions NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Actions next;
    if (broken_) writes_.erase(writes_.begin() + (writing_ ? 1 : 0), writes_.end());
    if (!writing_ && !writes_.empty()) {
      writing_ = true;
      next.write = &writes_.front();
    }
    if (!finished_ && reads_done_ && in_flight_ == 0 && !writing_ && writes_.empty()) {
      finished_ = next.finish = true;
    }
    return next;
  }

  void Perform(const Actions& next) {
    if (next.write != nullptr) StartWrite(next.write);
    if (next.read) StartRead(&incoming_);
    if (next.finish) Finish(grpc::Status::OK);
  }

  KServeCore* const core_;
  const CallContext context_;
  kv::ModelInferRequest incoming_;  // the read in progress
  absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<kv::ModelStreamInferResponse> writes_ ABSL_GUARDED_BY(mu_);  // front: writing
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerBidiReactor<kv::ModelInferRequest, kv::ModelStreamInferResponse>*
KServeService::ModelStreamInfer(grpc::CallbackServerContext* ctx) {
  return new InferStream(core_, ctx, access_);
}

}  // namespace gatescope
