// Which of the server's threads the kernel favours when they share a core.
//
// A forward pass is the work a request is waiting for; everything else (gRPC's pollers and
// executors, the HTTP and metrics listeners, image decoding, model control) is
// short work that can wait until a forward ends. Linux's default policy lets a thread that
// wakes up (a request's bytes arriving) preempt the running one, so on a core shared with
// gRPC a forward was interrupted several times per request and ran up to 60 % slower than
// alone (docs/performance.md, "Request threads under SCHED_BATCH"). Under SCHED_BATCH a
// waking thread does not preempt; it runs when the forward blocks or its time slice ends.
// Its share of the CPU is unchanged (same nice value), so no thread can be starved, and
// the policy needs no privilege (a container's default capabilities allow it).
//
// Contract: SetRequestThreadsToBatchScheduling is called once, by the thread that goes on
// to start the server's threads, before it starts any; threads inherit the policy of the
// thread that creates them, so every later thread runs SCHED_BATCH. (Threads libraries
// start before main, e.g. OpenBLAS's, keep the default.) Threads inside a
// ForwardPassScheduling scope run under the policy the process started with: the batcher's
// workers hold one for their whole life (they run the forwards, and also gather, scatter
// and send replies), and threads Torch starts from them inherit it. A thread gRPC started
// from a worker's reply would inherit it too; gRPC 1.51 was seen to start its extra threads
// only from its own (tests/integration/test_thread_scheduling.py checks after load).
//
// CPU placement (PlaceForwardPasses, --forward_cpus) is the same split in space: forward
// passes on CPUs of their own, every other thread on the rest. On a shared core the request
// path and the forward evict each other's code from the core's caches and branch
// predictors: the forward's framework code ran about 25 % slower than back to back alone,
// while its arithmetic (BLAS, the op library) did not slow down (docs/performance.md, "CPUs
// of their own for the forward passes"). Same contract: called once, before the server
// starts its threads; ForwardPassScheduling scopes move their thread onto the forward CPUs.
// No-ops off Linux.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/common/cpu_list.h"

namespace gatescope {

// Moves the calling thread (and so the threads it starts later) to SCHED_BATCH. Refused
// (FailedPrecondition) when the process was started under another policy than
// SCHED_OTHER, e.g. one an operator chose with chrt: that choice is kept for every thread.
absl::Status SetRequestThreadsToBatchScheduling();

// Moves the calling thread (and so the threads it starts later) onto `request_cpus`, and
// every other thread the process already runs onto `forward_cpus`: those belong to
// libraries started before main (OpenBLAS's pool), whose threads do forward work.
// ForwardPassScheduling scopes opened afterwards move their thread onto `forward_cpus`.
// The two lists may overlap. INVALID_ARGUMENT when either is empty or the kernel refuses a
// CPU (not in this process's cpuset); FailedPrecondition on a second call.
absl::Status PlaceForwardPasses(const CpuList& forward_cpus, const CpuList& request_cpus);

// While alive, the calling thread runs under the policy the process started with and, once
// PlaceForwardPasses has run, on the forward CPUs; on destruction it returns to SCHED_BATCH
// and the request CPUs. Does nothing for what was not changed. Nests (only the outermost scope switches). Each switch is a system call after
// which the kernel may run another thread: hold it around long stretches of forwards (a
// worker's life), not around each one.
class ForwardPassScheduling {
 public:
  ForwardPassScheduling();
  ~ForwardPassScheduling();
  ForwardPassScheduling(const ForwardPassScheduling&) = delete;
  ForwardPassScheduling& operator=(const ForwardPassScheduling&) = delete;

 private:
  bool counted_ = false;  // this scope counts in the thread's nesting depth
  bool switched_ = false;
  bool placed_ = false;
};

// Names the calling thread for `top -H`, /proc and debuggers (Linux keeps 15 characters).
void NameCurrentThread(const std::string& name);

}  // namespace gatescope
