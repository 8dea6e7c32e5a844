// Where one model instance runs: the instance_group of config.pbtxt, resolved to one spec
// per instance (Triton's semantics: `count` instances on each listed GPU).
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace gatescope {

struct InstanceSpec {
  enum class Kind { kCpu, kGpu };
  Kind kind = Kind::kCpu;
  int device = 0;    // GPU index (kGpu only)
  std::string name;  // "<group name>_<i>", for logs
  // kGpu only: record each input shape's forward as a CUDA graph and replay it
  // (config.pbtxt `optimization { cuda { graphs: true } }`, or --cuda_graphs).
  bool cuda_graphs = false;
  // The largest batch the instance is given (the model's max_batch_size as served): with
  // cuda_graphs, batches are padded up to a power of two no larger than this.
  int max_batch_size = 1;
};

// "CPU" or "GPU <device>".
inline std::string DeviceName(const InstanceSpec& spec) {
  return spec.kind == InstanceSpec::Kind::kGpu ? absl::StrCat("GPU ", spec.device) : "CPU";
}

// The GPUs this process can use, as the runtime reports them.
struct DeviceInventory {
  int gpus = 0;
  std::string no_gpu_reason;  // why there are none, when gpus == 0
};

}  // namespace gatescope
