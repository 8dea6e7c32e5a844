// Sets of CPUs as Linux writes them ("0-3,8": taskset -c, cpusets, /proc/*/status
// Cpus_allowed_list), and the calling thread's affinity. Used to give the forward passes
// CPUs of their own (--forward_cpus, server/common/thread_scheduling.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gatescope {

// CPU numbers, ascending and distinct. Empty means "not set".
struct CpuList {
  std::vector<int> cpus;
  bool operator==(const CpuList& other) const { return cpus == other.cpus; }
};

// "0", "0-3,8", "1,3-5" (spaces around items allowed). INVALID_ARGUMENT for an empty list,
// a descending or malformed range, a negative CPU or one at or above kMaxCpus.
absl::StatusOr<CpuList> ParseCpuList(absl::string_view text);
inline constexpr int kMaxCpus = 1024;  // what a cpu_set_t holds

// Ranges collapsed: {0,1,2,3,8} -> "0-3,8"; "" when empty.
std::string FormatCpuList(const CpuList& list);

// The CPUs of `a` not in `b`.
CpuList CpusNotIn(const CpuList& a, const CpuList& b);

// Whether every CPU of `part` is in `whole`.
bool CpusWithin(const CpuList& part, const CpuList& whole);

// The calling thread's CPU affinity (sched_getaffinity). Empty off Linux.
CpuList CurrentThreadCpus();

// Sets the calling thread's CPU affinity; threads it starts later inherit it. `cpus` must
// not be empty.
absl::Status SetCurrentThreadCpus(const CpuList& cpus);

// Sets the affinity of thread `tid` of this process (Linux only).
absl::Status SetThreadCpus(int tid, const CpuList& cpus);

// Abseil flag support: --forward_cpus=0-3 (empty text: not set).
bool AbslParseFlag(absl::string_view text, CpuList* list, std::string* error);
std::string AbslUnparseFlag(const CpuList& list);

}  // namespace gatescope
