#include "server/common/thread_scheduling.h"

#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

// Set once by SetRequestThreadsToBatchScheduling before the server starts its threads;
// read by forward passes afterwards (thread creation orders the write before their reads).
std::atomic<bool> g_request_threads_moved{false};

// Written once by PlaceForwardPasses before the server starts its threads, then only read
// (g_placed's release/acquire orders the lists before the reads).
std::atomic<bool> g_placed{false};
CpuList* g_forward_cpus = nullptr;
CpuList* g_request_cpus = nullptr;

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

absl::Status PlaceForwardPasses(const CpuList& forward_cpus, const CpuList& request_cpus) {
  if (forward_cpus.cpus.empty() || request_cpus.cpus.empty()) {
    return absl::InvalidArgumentError("forward and request CPU lists must not be empty");
  }
  if (g_placed.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("the forward passes' CPUs are already placed");
  }
  // Both lists are tried on the calling thread first, so that a CPU the kernel refuses
  // changes nothing.
  const CpuList before = CurrentThreadCpus();
  for (const CpuList* cpus : {&forward_cpus, &request_cpus}) {
    if (absl::Status st = SetCurrentThreadCpus(*cpus); !st.ok()) {
      if (!before.cpus.empty()) SetCurrentThreadCpus(before).IgnoreError();
      return st;
    }
  }
  const int self = static_cast<int>(gettid());
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const int tid = std::atoi(task.path().filename().c_str());
    if (tid <= 0 || tid == self) continue;
    // Refused only for a thread that exited meanwhile: nothing left to place.
    SetThreadCpus(tid, forward_cpus).IgnoreError();
  }
  g_forward_cpus = new CpuList(forward_cpus);  // for the process's life
  g_request_cpus = new CpuList(request_cpus);
  g_placed.store(true, std::memory_order_release);
  return absl::OkStatus();
}

ForwardPassScheduling::ForwardPassScheduling() {
  const bool moved = g_request_threads_moved.load(std::memory_order_acquire);
  const bool placed = g_placed.load(std::memory_order_acquire);
  if (!moved && !placed) return;
  counted_ = true;
  if (t_forward_depth++ > 0) return;
  if (moved) {
    sched_param param{};
    // Between SCHED_OTHER and SCHED_BATCH at priority 0 no privilege is needed; a failure
    // (a seccomp filter) leaves the thread as it was, which is only slower.
    switched_ = sched_setscheduler(0, SCHED_OTHER, &param) == 0;
  }
  // Refused only if the cpuset shrank since placement: the thread stays where it was.
  if (placed) placed_ = SetCurrentThreadCpus(*g_forward_cpus).ok();
}

ForwardPassScheduling::~ForwardPassScheduling() {
  if (!counted_ || --t_forward_depth > 0) return;
  if (switched_) {
    sched_param param{};
    sched_setscheduler(0, SCHED_BATCH, &param);
  }
  if (placed_) SetCurrentThreadCpus(*g_request_cpus).IgnoreError();
}

void NameCurrentThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

#else

absl::Status SetRequestThreadsToBatchScheduling() {
  return absl::UnimplementedError("SCHED_BATCH exists only on Linux");
}

absl::Status PlaceForwardPasses(const CpuList&, const CpuList&) {
  return absl::UnimplementedError("CPU affinity is set only on Linux");
}

ForwardPassScheduling::ForwardPassScheduling() { (void)switched_, (void)placed_, (void)counted_; }
ForwardPassScheduling::~ForwardPassScheduling() = default;

void NameCurrentThread(const std::string&) {}

#endif

}  // namespace gatescope
