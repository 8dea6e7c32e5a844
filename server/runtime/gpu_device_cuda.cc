// The GPU half of the device seam against a LibTorch built with CUDA. Compiled and linked
// only with such a LibTorch; CI compiles it (no link, no device) against LibTorch's own
// CUDA headers so that it at least stays well-formed.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/runtime/cuda_graph_policy.h"
#include "server/runtime/gpu_device.h"

// LibTorch 2.1 added the capture mode to CUDAGraph::capture_begin; the allocator calls
// that end a failed capture's pool are those of 2.5-2.11 (EndFailedCapture). GPU servers
// build against 2.x (2.11 on the device machines); LibTorch 1.13 (Debian's, CPU only) only
// compiles this file.
#define GATESCOPE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||            \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace gatescope {
namespace {

class StreamScope final : public DeviceScope {
 public:
  explicit StreamScope(c10::cuda::CUDAStream stream) : guard_(stream) {}

 private:
  c10::cuda::CUDAStreamGuard guard_;  // sets the device and its current stream
};

// A forward recorded as a CUDA graph: the device inputs it reads (refilled before each
// replay), the graph, and what the forward returned while it was recorded (tensors the
// graph rewrites on each replay).
struct RecordedForward {
  ModelInputs inputs;
  at::cuda::CUDAGraph graph;
  c10::IValue output;
};

// One instance's GPU: a stream of its own from the pool, so instances on one GPU overlap.
class GpuDevice final : public Device {
 public:
  explicit GpuDevice(const InstanceSpec& spec)
      : name_(spec.name),
        device_(c10::kCUDA, static_cast<c10::DeviceIndex>(spec.device)),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index())),
        graphs_(spec.cuda_graphs),
        max_batch_size_(spec.max_batch_size) {}

  c10::Device torch_device() const override { return device_; }

  std::unique_ptr<DeviceScope> Enter() override { return std::make_unique<StreamScope>(stream_); }

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

  // With CUDA graphs the batch is padded to its bucket (CudaGraphPolicy), run, recorded or
  // replayed at that size, and the outputs cut back to the batch. Inputs without one
  // common batch size run eagerly as they are.
  c10::IValue Run(const ModelInputs& inputs, const Forward& forward) override {
    const int64_t batch = graphs_ ? CudaGraphPolicy::CommonBatch(inputs) : -1;
    if (batch < 1) return forward(CopyIn(inputs));
    const int64_t padded = CudaGraphPolicy::Bucket(batch, max_batch_size_);
    const std::string key = CudaGraphPolicy::ShapeKey(inputs, padded);
    c10::IValue out;
    switch (policy_.Next(key)) {
      case CudaGraphPolicy::Action::kReplay:
        out = Replay(*recorded_.at(key), PadBatch(inputs, padded));
        break;
      case CudaGraphPolicy::Action::kRecord:
        out = Record(key, PadBatch(inputs, padded), forward);
        break;
      case CudaGraphPolicy::Action::kWarmUp:
        out = forward(CopyIn(PadBatch(inputs, padded)));
        break;
      case CudaGraphPolicy::Action::kEager:
        if (policy_.full() && !said_full_) {
          said_full_ = true;
          GS_LOG(INFO) << name_ << ": " << policy_.graphs()
                       << " CUDA graphs recorded, the most one instance keeps; inputs of "
                          "other shapes run without one";
        }
        return forward(CopyIn(inputs));
    }
    return FirstRows(out, batch, padded);
  }

 private:
  c10::IValue Replay(RecordedForward& recorded, const ModelInputs& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      // The key matched, so the sizes do; checked anyway, since copy_ would broadcast.
      TORCH_CHECK(recorded.inputs[i].sizes() == inputs[i].sizes(), "CUDA graph input ", i,
                  " has sizes ", recorded.inputs[i].sizes(), ", the call's ", inputs[i].sizes());
      recorded.inputs[i].copy_(inputs[i].pin_memory(), /*non_blocking=*/true);
    }
    recorded.graph.replay();
    return recorded.output;
  }

  // Answers the call eagerly, then records the same forward on the same inputs. The eager
  // call just before the recording lets whatever the forward sets up for this shape
  // (TorchScript's plan, library workspaces) happen outside it; the recording itself only
  // captures launches, so the call's answer is the eager one.
  c10::IValue Record(const std::string& key, const ModelInputs& inputs, const Forward& forward) {
    auto recorded = std::make_unique<RecordedForward>();
    recorded->inputs = CopyIn(inputs);
    c10::IValue answer = forward(recorded->inputs);
    // Graphs of one instance share a memory pool. That is safe because this instance
    // replays one graph at a time, on its one stream, and its caller takes each replay's
    // outputs out before the next: a later graph may reuse an earlier one's intermediates,
    // never outputs that are still to be read. The recorded inputs are allocated before
    // the capture, outside the pool.
    if (pool_.first == 0 && pool_.second == 0) pool_ = at::cuda::graph_pool_handle();
    std::string failure;
    try {
#if GATESCOPE_TORCH_AT_LEAST(2, 1)
      // Thread-local: the other instances' threads may go on allocating while this one
      // records (the global mode would make their cudaMalloc calls fail).
      recorded->graph.capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
#else
      recorded->graph.capture_begin(pool_);
#endif
      recorded->output = forward(recorded->inputs);
      recorded->graph.capture_end();
    } catch (const c10::Error& e) {
      failure = e.what_without_backtrace();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (failure.empty()) {
      policy_.Recorded(key);
      recorded_.emplace(key, std::move(recorded));
      GS_LOG(INFO) << name_ << ": recorded a CUDA graph for inputs " << key << " ("
                   << policy_.graphs() << " so far)";
      return answer;
    }
    EndFailedCapture();
    // Kept until the device closes: LibTorch's allocators may still hold a filter that
    // points at this graph, and destroying a failed graph can release the stream's cuBLAS
    // workspace, whose address the graphs recorded before are replaying.
    failed_recordings_.push_back(std::move(recorded));
    policy_.Failed(failure);
    GS_LOG(WARNING) << name_ << ": CUDA graphs off for this instance, its forward could not "
                    << "be recorded for inputs " << key << ": " << failure.substr(0, 400);
    return answer;
  }

  // After a failed recording: ends the stream capture if it is still open (a forward that
  // threw mid-capture), then, where LibTorch leaves it so (2.11: capture_end throws before
  // it), stops routing this stream's allocations into the pool and gives back the
  // recording's reference to it. Whether the routing was still on decides the release, so
  // a LibTorch that already released does not release twice. Later releases clean up in
  // CUDAGraph::reset, when the device closes. Every step may fail on its own.
  void EndFailedCapture() {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_.stream(), &status) == cudaSuccess &&
        status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream_.stream(), &partial) == cudaSuccess && partial != nullptr) {
        cudaGraphDestroy(partial);
      }
    }
#if GATESCOPE_TORCH_AT_LEAST(2, 5) && !GATESCOPE_TORCH_AT_LEAST(2, 12)
    bool routing_ended = false;
    try {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(device_.index(), pool_);
      routing_ended = true;
    } catch (const std::exception&) {
    }
    if (routing_ended) {
      try {
        c10::cuda::CUDACachingAllocator::releasePool(device_.index(), pool_);
      } catch (const std::exception&) {
      }
    }
#endif
    (void)cudaGetLastError();  // an error of the broken capture must not surface later
  }

  const std::string name_;
  const c10::Device device_;
  c10::cuda::CUDAStream stream_;
  // CUDA graphs (only when graphs_): which shapes are recorded, and their graphs.
  const bool graphs_;
  const int64_t max_batch_size_;
  CudaGraphPolicy policy_{CudaGraphPolicy::Limits{}};
  std::unordered_map<std::string, std::unique_ptr<RecordedForward>> recorded_;
  std::vector<std::unique_ptr<RecordedForward>> failed_recordings_;
  decltype(at::cuda::graph_pool_handle()) pool_{0, 0};  // set at the first recording
  bool said_full_ = false;
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
