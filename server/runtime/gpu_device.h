// The GPU half of the device seam, implemented twice: gpu_device_cuda.cc against a CUDA
// LibTorch, gpu_device_none.cc otherwise (CMake picks one). Used only by device.cc.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/runtime/device.h"

namespace gatescope {

// GPU `index` with its own stream from LibTorch's pool; UNAVAILABLE when it cannot be
// used.
absl::StatusOr<std::unique_ptr<Device>> OpenGpuDevice(int index);

// How many GPUs are visible, and why none when none is.
DeviceInventory VisibleGpus();

}  // namespace gatescope
