// Timer precision for threads whose timed waits are latency budgets.
#pragma once

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace gatescope {

// Makes the calling thread's timed waits wake within the kernel's resolution instead of
// its default 50 us of timer slack (Linux coalesces timers of a thread within its slack).
// For the dynamic batcher's workers, whose timed wait is the queue delay: measured on the
// 2-vCPU VM, a 200 us wait took 306 us at the median with the default and 256 us with
// slack 1 ns (docs/performance.md). Affects only the calling thread; no-op off Linux.
inline void UsePreciseTimers() {
#ifdef PR_SET_TIMERSLACK
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

}  // namespace gatescope
