// Which forward calls of one GPU instance run eagerly, which record a CUDA graph and which
// replay one (--cuda_graphs). Kept apart from CUDA so that it is tested without a GPU; the
// recording itself is in gpu_device_cuda.cc.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "server/runtime/named_tensors.h"

namespace gatescope {

// A graph replays fixed kernels on fixed addresses, so one is recorded per input shape
// (dtype and sizes of every input). A shape runs eagerly for its first calls, which lets
// TorchScript's profiling executor settle its plan for that shape and libraries set up
// their workspaces before a recording, and is recorded on the next. The number of graphs
// is bounded (each holds its own intermediate memory); shapes beyond it run eagerly. One
// failed recording (a forward that synchronises with the host, say) turns recording off
// for the instance: a model that cannot be recorded at one shape rarely can at another.
//
// Owned by one instance's device and used only from that instance's thread.
class CudaGraphPolicy {
 public:
  struct Limits {
    int eager_calls_per_shape = 2;
    int max_graphs = 32;
  };
  enum class Action { kEager, kRecord, kReplay };

  explicit CudaGraphPolicy(Limits limits) : limits_(limits) {}

  // "Float[64,1,28,28];Long[64,16]": each input's dtype and sizes, in order.
  static std::string ShapeKey(const ModelInputs& inputs);

  // What to do with a call whose inputs have `key`. After kRecord, say how it ended with
  // Recorded or Failed; a recording cut short by the model's own error (a rejected input)
  // needs neither, and the shape is recorded on a later call.
  Action Next(const std::string& key);
  void Recorded(const std::string& key) { recorded_.insert(key); }
  void Failed(std::string reason) { failure_ = std::move(reason); }

  int graphs() const { return static_cast<int>(recorded_.size()); }
  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }
  // True once the first shape beyond max_graphs has run eagerly (for a single log line).
  bool full() const { return full_; }

 private:
  const Limits limits_;
  std::unordered_map<std::string, int> eager_calls_;
  std::unordered_set<std::string> recorded_;
  std::string failure_;
  bool full_ = false;
};

}  // namespace gatescope
