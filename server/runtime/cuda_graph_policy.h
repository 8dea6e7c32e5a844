// Which forward calls of one GPU instance run eagerly, which record a CUDA graph and which
// replay one (--cuda_graphs), and the batch sizes graphs are recorded for. Kept apart from
// CUDA so that it is tested without a GPU; the recording itself is in cuda_graphs_cuda.cc.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <ATen/core/ivalue.h>

#include "server/runtime/named_tensors.h"

namespace gatescope {

// A graph replays fixed kernels on fixed addresses, so one is recorded per input shape
// (dtype and sizes of every input). Batches are padded up to a bucket (a power of two, at
// most the model's max_batch_size) so that the sizes the dynamic batcher forms share a
// few graphs: the rows of a batch are independent, and padding repeats the first row. A
// shape runs eagerly (padded) for its first calls, which lets TorchScript's profiling
// executor settle its plan for that shape and libraries set up their workspaces before a
// recording, and is recorded on the next. The number of graphs is bounded (each holds
// its own intermediate memory); shapes beyond it run eagerly, unpadded. One failed
// recording (a forward that synchronises with the host, say) turns recording off for the
// instance: a model that cannot be recorded at one shape rarely can at another.
//
// Owned by one instance's device and used only from that instance's thread.
class CudaGraphPolicy {
 public:
  struct Limits {
    int warm_up_calls_per_shape = 2;
    int max_graphs = 32;
  };
  // kWarmUp: run eagerly on the padded inputs; kEager: run eagerly on the inputs as given.
  enum class Action { kEager, kWarmUp, kRecord, kReplay };

  explicit CudaGraphPolicy(Limits limits) : limits_(limits) {}

  // The batch size every input leads with, or -1 when there is none (no inputs, a 0-dim
  // input, inputs of different or zero leading sizes): such calls run eagerly, unpadded.
  static int64_t CommonBatch(const ModelInputs& inputs);

  // The batch size a batch of `batch` (>= 1) is padded to: the next power of two, but at
  // most `max_batch` and never below `batch`.
  static int64_t Bucket(int64_t batch, int64_t max_batch);
  // Every size Bucket pads a batch of 1..`max_batch` to, ascending: the powers of two below
  // `max_batch`, then `max_batch` (at least 1).
  static std::vector<int64_t> Buckets(int64_t max_batch);

  // "Float[64,1,28,28];Long[64,16]": each input's dtype and sizes, in order, with the
  // batch dimension read as `batch` rows when given (>= 0): the key of the padded inputs
  // without padding them.
  static std::string ShapeKey(const ModelInputs& inputs, int64_t batch = -1);

  // What to do with a call whose padded inputs have `key`. After kRecord, say how it
  // ended with Recorded or Failed; a recording cut short by the model's own error needs
  // neither, and the shape is recorded on a later call.
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
  std::unordered_map<std::string, int> warm_up_calls_;
  std::unordered_set<std::string> recorded_;
  std::string failure_;
  bool full_ = false;
};

// `inputs` (each leading with the batch dimension, all of one batch size: CommonBatch)
// grown to `batch` rows by repeating the first row; the same tensors when they already
// have `batch` rows.
ModelInputs PadBatch(const ModelInputs& inputs, int64_t batch);

// The outputs of a forward over a batch padded to `padded` rows, for the first `batch`:
// in a Dict[str, Tensor], every tensor of `padded` rows is taken to lead with the batch
// and becomes a view of its first `batch` rows. Anything else is left as it is and meets
// the runner's checks as it would have unpadded (a non-batch output that happens to have
// `padded` rows would be cut too; the output contract rules such outputs out).
c10::IValue FirstRows(const c10::IValue& outputs, int64_t batch, int64_t padded);

}  // namespace gatescope
