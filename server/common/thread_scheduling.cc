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

// Written once by SetRequestThreadsToBatchScheduling before any other thread exists; read
// by forward threads afterwards (thread creation orders the write before their reads).
std::atomic<bool> g_request_threads_moved{false};

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

void RunAsForwardThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  if (!g_request_threads_moved.load(std::memory_order_acquire)) return;
  sched_param param{};
  // Cannot fail: returning to SCHED_OTHER with priority 0 needs no privilege.
  sched_setscheduler(0, SCHED_OTHER, &param);
}

#else

absl::Status SetRequestThreadsToBatchScheduling() {
  return absl::UnimplementedError("SCHED_BATCH exists only on Linux");
}

void RunAsForwardThread(const std::string&) {}

#endif

}  // namespace gatescope
