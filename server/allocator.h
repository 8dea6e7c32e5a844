// The process's allocator: which one serves malloc (checked rather than assumed), and the
// periodic return of unused memory to the system that jemalloc's configuration leaves to us.
#pragma once

#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gatescope {

// "jemalloc <version> ..." when jemalloc's malloc is the one in use (a 1 MiB allocation is
// counted by jemalloc's own per-thread statistics); otherwise what is in use and why (a
// sanitizer build, or another allocator preloaded over the linked jemalloc). Call once at
// start.
std::string DescribeAllocator();

// Every `period`, returns the memory jemalloc holds unused to the system (all arenas
// purged), so that RSS falls back after a burst: the server's jemalloc never does so by
// itself (allocator.cc says why). A no-op without jemalloc or with a zero period. The
// destructor stops and joins the thread.
class UnusedMemoryReturner {
 public:
  explicit UnusedMemoryReturner(absl::Duration period);
  ~UnusedMemoryReturner();
  UnusedMemoryReturner(const UnusedMemoryReturner&) = delete;
  UnusedMemoryReturner& operator=(const UnusedMemoryReturner&) = delete;

 private:
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gatescope
