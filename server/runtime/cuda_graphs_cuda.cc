// CUDA graph recording and replay against a CUDA LibTorch (2.x on the device machines; 1.13,
// Debian's, CPU only, only compiles it). docs/gpu.md, "CUDA graphs in the server".
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/version.h>

#include <atomic>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/common/log.h"
#include "server/runtime/cuda_graph_policy.h"
#include "server/runtime/cuda_graphs.h"

// LibTorch 2.1 added the capture mode to CUDAGraph::capture_begin; the allocator calls
// that end a failed capture's pool are those of 2.5-2.11 (EndFailedCapture).
#define GATESCOPE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||            \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace gatescope {
namespace {

// A forward recorded as a CUDA graph: the device inputs it reads (refilled before each
// replay), the graph, and what the forward returned while it was recorded (tensors the
// graph rewrites on each replay).
struct RecordedForward {
  ModelInputs inputs;
  at::cuda::CUDAGraph graph;
  c10::IValue output;
};

class RecordingForwards final : public CudaGraphForwards {
 public:
  explicit RecordingForwards(CudaGraphTarget target) : target_(std::move(target)) {}

  c10::IValue Run(const ModelInputs& inputs, const Device::Forward& forward) override {
    const int64_t batch = CudaGraphPolicy::CommonBatch(inputs);
    if (batch < 1) return forward(target_.copy_in(inputs));
    const int64_t padded = CudaGraphPolicy::Bucket(batch, target_.max_batch_size);
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
        out = forward(target_.copy_in(PadBatch(inputs, padded)));
        break;
      case CudaGraphPolicy::Action::kEager:
        if (policy_.full() && !said_full_) {
          said_full_ = true;
          GS_LOG(INFO) << target_.instance << ": " << policy_.graphs()
                       << " CUDA graphs recorded, the most one instance keeps; inputs of "
                          "other shapes run without one";
        }
        return forward(target_.copy_in(inputs));
    }
    return FirstRows(out, batch, padded);
  }

  bool recording() const override { return recording_.load(std::memory_order_relaxed); }

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
  c10::IValue Record(const std::string& key, const ModelInputs& inputs,
                     const Device::Forward& forward) {
    auto recorded = std::make_unique<RecordedForward>();
    recorded->inputs = target_.copy_in(inputs);
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
      GS_LOG(INFO) << target_.instance << ": recorded a CUDA graph for inputs " << key << " ("
                   << policy_.graphs() << " so far)";
      return answer;
    }
    EndFailedCapture();
    // Kept until the device closes: LibTorch's allocators may still hold a filter that
    // points at this graph, and destroying a failed graph can release the stream's cuBLAS
    // workspace, whose address the graphs recorded before are replaying.
    failed_recordings_.push_back(std::move(recorded));
    policy_.Failed(failure);
    recording_.store(false, std::memory_order_relaxed);
    GS_LOG(WARNING) << target_.instance << ": CUDA graphs off for this instance, its forward "
                    << "could not be recorded for inputs " << key << ": "
                    << failure.substr(0, 400);
    return answer;
  }

  // After a failed recording: ends the stream capture if it is still open (a forward that
  // threw mid-capture), then, where LibTorch leaves it so (2.11: capture_end throws before
  // it), stops routing this stream's allocations into the pool and gives back the
  // recording's reference to it. Whether the routing was still on decides the release, so
  // a LibTorch that already released does not release twice. Later releases clean up in
  // CUDAGraph::reset, when the device closes. Every step may fail on its own.
  void EndFailedCapture() {
    const cudaStream_t stream = target_.stream.stream();
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
        status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial != nullptr) {
        cudaGraphDestroy(partial);
      }
    }
#if GATESCOPE_TORCH_AT_LEAST(2, 5) && !GATESCOPE_TORCH_AT_LEAST(2, 12)
    bool routing_ended = false;
    try {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(target_.device.index(), pool_);
      routing_ended = true;
    } catch (const std::exception&) {
    }
    if (routing_ended) {
      try {
        c10::cuda::CUDACachingAllocator::releasePool(target_.device.index(), pool_);
      } catch (const std::exception&) {
      }
    }
#endif
    (void)cudaGetLastError();  // an error of the broken capture must not surface later
  }

  const CudaGraphTarget target_;
  CudaGraphPolicy policy_{CudaGraphPolicy::Limits{}};
  std::unordered_map<std::string, std::unique_ptr<RecordedForward>> recorded_;
  std::vector<std::unique_ptr<RecordedForward>> failed_recordings_;
  decltype(at::cuda::graph_pool_handle()) pool_{0, 0};  // set at the first recording
  bool said_full_ = false;
  // policy_.failed() negated, for other threads (policy_ is the instance thread's alone).
  std::atomic<bool> recording_{true};
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaGraphForwards>> MakeCudaGraphForwards(CudaGraphTarget target) {
  return std::unique_ptr<CudaGraphForwards>(std::make_unique<RecordingForwards>(std::move(target)));
}

}  // namespace gatescope
