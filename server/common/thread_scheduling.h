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
// No-ops off Linux.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gatescope {

// Moves the calling thread (and so the threads it starts later) to SCHED_BATCH. Refused
// (FailedPrecondition) when the process was started under another policy than
// SCHED_OTHER, e.g. one an operator chose with chrt: that choice is kept for every thread.
absl::Status SetRequestThreadsToBatchScheduling();

// While alive, the calling thread runs under the policy the process started with; on
// destruction it returns to SCHED_BATCH. Does nothing unless the request threads were
// moved. Nests (only the outermost scope switches). Each switch is a system call after
// which the kernel may run another thread: hold it around long stretches of forwards (a
// worker's life), not around each one.
class ForwardPassScheduling {
 public:
  ForwardPassScheduling();
  ~ForwardPassScheduling();
  ForwardPassScheduling(const ForwardPassScheduling&) = delete;
  ForwardPassScheduling& operator=(const ForwardPassScheduling&) = delete;

 private:
  bool switched_ = false;
};

// Names the calling thread for `top -H`, /proc and debuggers (Linux keeps 15 characters).
void NameCurrentThread(const std::string& name);

}  // namespace gatescope
