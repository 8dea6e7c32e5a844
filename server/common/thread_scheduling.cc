#include "server/common/thread_scheduling.h"

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

// Set once by SetRequestThreadsToBatchScheduling before the server starts its threads;
// read by forward passes afterwards (thread creation orders the write before their reads).
std::atomic<bool> g_request_threads_moved{false};

// Outermost ForwardPassScheduling scopes open on this thread.
thread_local int t_forward_depth = 0;

}  // namespace

#ifdef __linux__

absl::Status SetRequestThreadsToBatchScheduling() {
  const int policy = sched_getscheduler(0);
  if (policy != SCHED_OTHER) {
    return absl::FailedPreconditionError(
        absl::StrCat("the process runs under scheduling policy ", policy,
                     ", not SCHED_OTHER; leaving every thread's policy as it is"));
  }
  sched_param param{};
  if (sched_setscheduler(0, SCHED_BATCH, &param) != 0) {
    return absl::InternalError(absl::StrCat("sched_setscheduler(SCHED_BATCH): ",
                                            std::strerror(errno)));
  }
  g_request_threads_moved.store(true, std::memory_order_release);
  return absl::OkStatus();
}

ForwardPassScheduling::ForwardPassScheduling() {
  if (!g_request_threads_moved.load(std::memory_order_acquire)) return;
  if (t_forward_depth++ > 0) return;
  sched_param param{};
  // Between SCHED_OTHER and SCHED_BATCH at priority 0 no privilege is needed; a failure
  // (a seccomp filter) leaves the thread as it was, which is only slower.
  switched_ = sched_setscheduler(0, SCHED_OTHER, &param) == 0;
}

ForwardPassScheduling::~ForwardPassScheduling() {
  if (!g_request_threads_moved.load(std::memory_order_acquire)) return;
  if (--t_forward_depth > 0 || !switched_) return;
  sched_param param{};
  sched_setscheduler(0, SCHED_BATCH, &param);
}

void NameCurrentThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

#else

absl::Status SetRequestThreadsToBatchScheduling() {
  return absl::UnimplementedError("SCHED_BATCH exists only on Linux");
}

ForwardPassScheduling::ForwardPassScheduling() { (void)switched_; }
ForwardPassScheduling::~ForwardPassScheduling() = default;

void NameCurrentThread(const std::string&) {}

#endif

}  // namespace gatescope
