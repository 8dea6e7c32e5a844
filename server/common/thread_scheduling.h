// Which of the server's threads the kernel favours when they share a core.
//
// A forward pass is the work a request is waiting for; everything else (gRPC's pollers and
// executors, the HTTP and metrics listeners, image decoding, model control) is short work
// that can wait until a forward ends. Linux's default policy lets a thread that wakes up
// (a request's bytes arriving) preempt the running one, so on a core shared with gRPC a
// forward was interrupted several times per request and ran up to 60 % slower than alone
// (docs/performance.md, "Request threads under SCHED_BATCH"). Under SCHED_BATCH a waking
// thread does not preempt; it runs when the forward blocks or its time slice ends. Its
// share of the CPU is unchanged (same nice value), so no thread can be starved, and the
// policy needs no privilege (a container's default capabilities allow it).
//
// Contract: SetRequestThreadsToBatchScheduling is called once, on the main thread, before
// the server starts any thread; threads inherit the policy of the thread that creates
// them, so every later thread is a request thread unless it calls RunAsForwardThread.
// RunAsForwardThread gives the calling thread the policy the process started with (and a
// name for `top -H` and /proc). Both affect only the calling thread. No-ops off Linux.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gatescope {

// Moves the calling thread (and so the threads it starts later) to SCHED_BATCH. Refused
// (FailedPrecondition) when the process was started under another policy than
// SCHED_OTHER, e.g. a real-time one an operator chose with chrt: that choice is kept.
absl::Status SetRequestThreadsToBatchScheduling();

// For threads that run forward passes: back to the policy the process started with, named
// `name` (at most 15 characters are kept). Safe to call whether or not the request
// threads were moved.
void RunAsForwardThread(const std::string& name);

}  // namespace gatescope
