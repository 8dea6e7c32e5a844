// CUDA graphs of one GPU instance's forwards: which calls warm up, record or replay
// (CudaGraphPolicy), and the recordings themselves. Implemented twice:
// cuda_graphs_cuda.cc against a CUDA LibTorch, cuda_graphs_none.cc for a server configured
// with -DGATESCOPE_CUDA_GRAPHS=OFF (a LibTorch whose graph API the recording does not
// compile against). Used only by gpu_device_cuda.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <c10/core/Device.h>
#include <c10/cuda/CUDAStream.h>

#include "absl/status/statusor.h"
#include "server/runtime/device.h"

namespace gatescope {

// Owned by one GPU device and used from its runner's one thread, inside the device's scope
// (its stream current).
class CudaGraphForwards {
 public:
  virtual ~CudaGraphForwards() = default;
  // Device::Run with graphs: `inputs` (CPU tensors) padded to their bucket, run eagerly,
  // recorded or replayed as the policy says, the result cut back to the batch's rows.
  // Inputs without one common batch size run eagerly as they are.
  virtual c10::IValue Run(const ModelInputs& inputs, const Device::Forward& forward) = 0;
  // True until a failed recording turns graphs off for the instance; never true again
  // after. Any thread.
  virtual bool recording() const = 0;
};

struct CudaGraphTarget {
  std::string instance;  // for the log
  c10::Device device{c10::kCUDA};
  c10::cuda::CUDAStream stream;  // the instance's own (never the default stream)
  int64_t max_batch_size = 1;    // the largest bucket a batch is padded to
  // The device's copy of CPU inputs onto the GPU, asynchronous on `stream`.
  std::function<ModelInputs(const ModelInputs&)> copy_in;
};

// UNIMPLEMENTED when this server was built without CUDA graphs.
absl::StatusOr<std::unique_ptr<CudaGraphForwards>> MakeCudaGraphForwards(CudaGraphTarget target);

}  // namespace gatescope
