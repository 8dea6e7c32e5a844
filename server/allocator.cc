// The server links jemalloc (Debian's libjemalloc2) so that it is malloc for the whole
// process, LibTorch's CPU tensors included. Why (benchmarks/bench_allocators.py,
// docs/performance.md): glibc's malloc mmaps every block above its mmap threshold and unmaps
// it on free, so each large intermediate tensor of a forward pass page-faults in afresh on
// every call. Per-image throughput of the classifiers fell 4-5x above batch 16 (the batches
// dynamic batching forms), and the segmenter ran at a fifth of its speed even at batch 1.
//
// jemalloc's default decay (dirty pages returned to the system gradually over 10 s) still
// faulted most of a segmentation batch in afresh on every call, even with 60 s, so decay is
// off here (malloc_conf below): freed memory stays mapped for reuse, and the peak RSS is the
// same as glibc's. UnusedMemoryReturner gives memory back on a fixed period instead, one
// purge at a time, so RSS falls after a burst at the cost of one slower batch per period.
// MALLOC_CONF in the environment still overrides this configuration.
#include "server/allocator.h"

#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"

#ifdef GATESCOPE_JEMALLOC
#include <jemalloc/jemalloc.h>

// jemalloc reads this symbol (declared extern "C" by its header) at its first allocation.
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
#endif

namespace gatescope {

std::string DescribeAllocator() {
#ifdef GATESCOPE_JEMALLOC
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) != 0 || version == nullptr) {
    return "unknown: jemalloc is linked but does not answer";
  }
  uint64_t before = 0;
  uint64_t after = 0;
  size = sizeof(uint64_t);
  const bool counted = mallctl("thread.allocated", &before, &size, nullptr, 0) == 0;
  void* volatile block = malloc(1 << 20);
  if (!counted || mallctl("thread.allocated", &after, &size, nullptr, 0) != 0) {
    free(block);
    return absl::StrCat("jemalloc ", version, " linked; its statistics cannot tell whether it "
                        "is malloc");
  }
  free(block);
  if (after - before < (1u << 20)) {
    return "not jemalloc: another allocator (a preloaded one?) took malloc over the linked "
           "jemalloc";
  }
  ssize_t dirty_decay_ms = 0;
  size = sizeof(dirty_decay_ms);
  mallctl("opt.dirty_decay_ms", &dirty_decay_ms, &size, nullptr, 0);
  return absl::StrCat("jemalloc ", version, " (dirty_decay_ms ", dirty_decay_ms, ")");
#elif defined(GATESCOPE_SANITIZED)
  return "the sanitizer runtime's (sanitizer build; jemalloc not linked)";
#else
  return "glibc malloc (jemalloc not linked)";
#endif
}

UnusedMemoryReturner::UnusedMemoryReturner(absl::Duration period) {
#ifdef GATESCOPE_JEMALLOC
  if (period <= absl::ZeroDuration()) return;
  thread_ = std::thread([this, period] {
    absl::MutexLock lock(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), period)) {
      mu_.Unlock();  // a purge takes milliseconds; the destructor need not wait for it
      mallctl(absl::StrCat("arena.", MALLCTL_ARENAS_ALL, ".purge").c_str(), nullptr, nullptr,
              nullptr, 0);
      mu_.Lock();
    }
  });
#else
  (void)period;
#endif
}

UnusedMemoryReturner::~UnusedMemoryReturner() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace gatescope
