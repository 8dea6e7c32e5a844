// The GPU half of the device seam, implemented twice: gpu_device_cuda.cc against a CUDA
// LibTorch, gpu_device_none.cc otherwise (CMake picks one). Used only by device.cc.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/runtime/device.h"

namespace gatescope {

// GPU `spec.device` with its own stream from LibTorch's pool, recording CUDA graphs when
// `spec.cuda_graphs`; UNAVAILABLE when it cannot be used.
absl::StatusOr<std::unique_ptr<Device>> OpenGpuDevice(const InstanceSpec& spec);

// How many GPUs are visible, and why none when none is.
DeviceInventory VisibleGpus();

}  // namespace gatescope
