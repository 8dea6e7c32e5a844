#include "server/common/cpu_list.h"

#ifdef __linux__
#include <sched.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gatescope {
namespace {

absl::StatusOr<int> ParseCpu(absl::string_view text, absl::string_view list) {
  int cpu = -1;
  if (!absl::SimpleAtoi(text, &cpu) || cpu < 0 || cpu >= kMaxCpus) {
    return absl::InvalidArgumentError(absl::StrCat("CPU list '", list, "': '", text,
                                                   "' is not a CPU number 0..",
                                                   kMaxCpus - 1));
  }
  return cpu;
}

}  // namespace

absl::StatusOr<CpuList> ParseCpuList(absl::string_view text) {
  CpuList out;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError("empty CPU list");
  }
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    const std::vector<absl::string_view> ends = absl::StrSplit(item, absl::MaxSplits('-', 1));
    auto first = ParseCpu(absl::StripAsciiWhitespace(ends[0]), text);
    if (!first.ok()) return first.status();
    int last = *first;
    if (ends.size() == 2) {
      auto end = ParseCpu(absl::StripAsciiWhitespace(ends[1]), text);
      if (!end.ok()) return end.status();
      if (*end < *first) {
        return absl::InvalidArgumentError(
            absl::StrCat("CPU list '", text, "': range '", item, "' runs backwards"));
      }
      last = *end;
    }
    for (int cpu = *first; cpu <= last; ++cpu) out.cpus.push_back(cpu);
  }
  std::sort(out.cpus.begin(), out.cpus.end());
  out.cpus.erase(std::unique(out.cpus.begin(), out.cpus.end()), out.cpus.end());
  return out;
}

std::string FormatCpuList(const CpuList& list) {
  std::string out;
  const std::vector<int>& c = list.cpus;
  for (size_t i = 0; i < c.size();) {
    size_t j = i;
    while (j + 1 < c.size() && c[j + 1] == c[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", c[i]);
    if (j > i) absl::StrAppend(&out, "-", c[j]);
    i = j + 1;
  }
  return out;
}

CpuList CpusNotIn(const CpuList& a, const CpuList& b) {
  CpuList out;
  std::set_difference(a.cpus.begin(), a.cpus.end(), b.cpus.begin(), b.cpus.end(),
                      std::back_inserter(out.cpus));
  return out;
}

bool CpusWithin(const CpuList& part, const CpuList& whole) {
  return std::includes(whole.cpus.begin(), whole.cpus.end(), part.cpus.begin(),
                       part.cpus.end());
}

#ifdef __linux__

namespace {

cpu_set_t ToSet(const CpuList& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus.cpus) CPU_SET(cpu, &set);
  return set;
}

}  // namespace

CpuList CurrentThreadCpus() {
  CpuList out;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (CPU_ISSET(cpu, &set)) out.cpus.push_back(cpu);
  }
  return out;
}

absl::Status SetThreadCpus(int tid, const CpuList& cpus) {
  if (cpus.cpus.empty()) return absl::InvalidArgumentError("no CPUs to run on");
  const cpu_set_t set = ToSet(cpus);
  if (sched_setaffinity(tid, sizeof(set), &set) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot run on CPUs ", FormatCpuList(cpus), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status SetCurrentThreadCpus(const CpuList& cpus) { return SetThreadCpus(0, cpus); }

#else

CpuList CurrentThreadCpus() { return {}; }
absl::Status SetThreadCpus(int, const CpuList&) {
  return absl::UnimplementedError("CPU affinity is set only on Linux");
}
absl::Status SetCurrentThreadCpus(const CpuList& cpus) { return SetThreadCpus(0, cpus); }

#endif

bool AbslParseFlag(absl::string_view text, CpuList* list, std::string* error) {
  if (absl::StripAsciiWhitespace(text).empty()) {
    *list = CpuList{};
    return true;
  }
  absl::StatusOr<CpuList> parsed = ParseCpuList(text);
  if (!parsed.ok()) {
    *error = std::string(parsed.status().message());
    return false;
  }
  *list = *std::move(parsed);
  return true;
}

std::string AbslUnparseFlag(const CpuList& list) { return FormatCpuList(list); }

}  // namespace gatescope
