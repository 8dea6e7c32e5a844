// How many intra-op threads each forward pass gets when --torch_threads is 0 (automatic):
// from the cores this process may really use and the model instances that run forwards at
// once. Measured on 2 cores (docs/performance.md): one Torch thread per core for every
// instance oversubscribes the machine, because gRPC and image decoding need a core too.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gatescope {

struct TorchThreads {
  int threads = 1;
  std::string reason;  // for the start-up log line
};

// `requested` > 0 is taken as given. 0: (usable_cores - 1) / instances, at least 1; one core
// is left for gRPC and image preparation when there are at least two, unless
// `request_cores_apart` (--forward_cpus gave the forwards `usable_cores` of their own).
TorchThreads ChooseTorchThreads(int requested, int usable_cores, int instances,
                                bool request_cores_apart = false);

// The CPU quota of a cgroup v2 `cpu.max` file's text ("max 100000" or "200000 100000"), in
// whole cores rounded up; nullopt when unlimited or unreadable.
std::optional<int> CgroupCpuQuotaCores(std::string_view cpu_max);

// Cores this process may use: its CPU affinity (taskset, cpusets), capped by its cgroup v2
// CPU quota (/sys/fs/cgroup/cpu.max: Kubernetes CPU limits on cgroup v2 nodes; cgroup v1
// quotas are not read). At least 1.
int UsableCores();

// `cpus` (a CPU count, e.g. of --forward_cpus) capped by the cgroup v2 CPU quota; at least 1.
int WithinCpuQuota(int cpus);

// Sets LibTorch's intra-op threads and, when LibTorch's BLAS is OpenBLAS (whose own pool is
// sized from the machine's cores at load), OpenBLAS's threads to the same number.
void ApplyTorchThreads(int threads);

}  // namespace gatescope
