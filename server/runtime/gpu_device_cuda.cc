// The GPU half of the device seam against a LibTorch built with CUDA. Compiled and linked
// only with such a LibTorch; CI compiles it (no link, no device) against LibTorch's own
// CUDA headers so that it at least stays well-formed.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/runtime/cuda_graphs.h"
#include "server/runtime/gpu_device.h"

namespace gatescope {
namespace {

class StreamScope final : public DeviceScope {
 public:
  explicit StreamScope(c10::cuda::CUDAStream stream) : guard_(stream) {}

 private:
  c10::cuda::CUDAStreamGuard guard_;  // sets the device and its current stream
};

// One instance's GPU: a stream of its own from the pool, so instances on one GPU overlap.
class GpuDevice final : public Device {
 public:
  explicit GpuDevice(const InstanceSpec& spec)
      : name_(spec.name),
        device_(c10::kCUDA, static_cast<c10::DeviceIndex>(spec.device)),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index())) {
    if (!spec.cuda_graphs) return;
    auto graphs = MakeCudaGraphForwards(
        {name_, device_, stream_, spec.max_batch_size,
         [this](const ModelInputs& inputs) { return CopyIn(inputs); }});
    if (graphs.ok()) {
      graphs_ = *std::move(graphs);
    } else {
      GS_LOG(WARNING) << name_ << ": CUDA graphs off for this instance: "
                      << graphs.status().message();
    }
  }

  // graphs_ copies in through this device (it holds `this`): neither copied nor moved.
  GpuDevice(const GpuDevice&) = delete;
  GpuDevice& operator=(const GpuDevice&) = delete;

  c10::Device torch_device() const override { return device_; }

  std::unique_ptr<DeviceScope> Enter() override { return std::make_unique<StreamScope>(stream_); }

  bool records_cuda_graphs() const override { return graphs_ && graphs_->recording(); }

  ModelInputs CopyIn(const ModelInputs& inputs) override {
    ModelInputs out;
    out.reserve(inputs.size());
    for (const at::Tensor& t : inputs) {
      // pin_memory() stages through LibTorch's caching pinned allocator, which keeps the
      // block alive until the asynchronous copy on this stream has used it.
      out.push_back(t.pin_memory().to(device_, /*non_blocking=*/true));
    }
    return out;
  }

  // Every output on this device is queued into pinned memory on this stream and the stream
  // is waited for once: a copy into pageable memory would block the thread for each output
  // in turn. Outputs already on the CPU pass through; one on another device (a model that
  // names its own) is copied with a wait of its own, since its copy would not be on this
  // stream. The pinned blocks come from LibTorch's caching host allocator, which keeps them
  // for reuse: host memory stays locked at the largest outputs seen.
  NamedTensors CopyOut(const NamedTensors& tensors) override {
    NamedTensors out;
    for (const auto& [name, t] : tensors) {
      if (t.device() != device_) {
        out.emplace(name, t.is_cpu() ? t : t.to(c10::kCPU));
        continue;
      }
      at::Tensor host = at::empty(t.sizes(), t.options().device(c10::kCPU).pinned_memory(true));
      host.copy_(t, /*non_blocking=*/true);
      out.emplace(name, std::move(host));
    }
    stream_.synchronize();
    return out;
  }

  // With CUDA graphs (CudaGraphForwards) the batch is padded to its bucket, run, recorded
  // or replayed at that size, and the outputs cut back to the batch.
  c10::IValue Run(const ModelInputs& inputs, const Forward& forward) override {
    return graphs_ ? graphs_->Run(inputs, forward) : forward(CopyIn(inputs));
  }

 private:
  const std::string name_;
  const c10::Device device_;
  c10::cuda::CUDAStream stream_;
  std::unique_ptr<CudaGraphForwards> graphs_;  // null: every forward eager
};

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> OpenGpuDevice(const InstanceSpec& spec) {
  const int visible = c10::cuda::device_count();
  if (spec.device < 0 || spec.device >= visible) {
    return absl::UnavailableError(
        absl::StrCat("GPU ", spec.device, " is not available (", visible, " visible)"));
  }
  // GPU instances compute in full float32, as CPU instances do: LibTorch's default lets
  // cuDNN convolutions round their inputs to TF32, which moved served logits by up to
  // 4.5e-3 from the CPU server's on an H200 (docs/benchmarks.md, "GPU"). Process-wide.
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  return std::unique_ptr<Device>(std::make_unique<GpuDevice>(spec));
}

DeviceInventory VisibleGpus() {
  const int visible = c10::cuda::device_count();
  return {visible, visible == 0 ? "no CUDA device is visible" : ""};
}

}  // namespace gatescope
