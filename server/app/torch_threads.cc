#include "server/app/torch_threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/cpu_list.h"

namespace gatescope {

TorchThreads ChooseTorchThreads(int requested, int usable_cores, int instances,
                                bool request_cores_apart) {
  if (requested > 0) return {requested, "--torch_threads"};
  const int cores = std::max(1, usable_cores);
  const int spare = cores > 1 && !request_cores_apart ? 1 : 0;
  const int per_instance = std::max(1, (cores - spare) / std::max(1, instances));
  return {per_instance,
          absl::StrCat("automatic: ", cores,
                       request_cores_apart ? " core(s) of --forward_cpus" : " usable core(s)",
                       spare ? ", 1 left for gRPC and decoding" : "", ", ", instances,
                       " instance(s) per model")};
}

std::optional<int> CgroupCpuQuotaCores(std::string_view cpu_max) {
  // (Debian's Abseil has its own string_view.)
  const absl::string_view text(cpu_max.data(), cpu_max.size());
  const std::vector<absl::string_view> fields =
      absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (fields.size() != 2 || fields[0] == "max") return std::nullopt;
  int64_t quota = 0, period = 0;
  if (!absl::SimpleAtoi(fields[0], &quota) || !absl::SimpleAtoi(fields[1], &period) ||
      quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return static_cast<int>((quota + period - 1) / period);
}

int WithinCpuQuota(int cpus) {
  std::ifstream file("/sys/fs/cgroup/cpu.max");
  std::stringstream text;
  text << file.rdbuf();
  if (std::optional<int> quota = CgroupCpuQuotaCores(text.str())) cpus = std::min(cpus, *quota);
  return std::max(1, cpus);
}

int UsableCores() {
  int cores = static_cast<int>(CurrentThreadCpus().cpus.size());
  // (More CPUs than a cpu_set_t holds: the machine's count.)
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  return WithinCpuQuota(cores);
}

void ApplyTorchThreads(int threads) {
  at::set_num_threads(threads);
  // OpenBLAS's pool would otherwise keep one thread per machine core behind every sgemm.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(threads);
  }
}

}  // namespace gatescope
