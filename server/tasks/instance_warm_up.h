// Warm-up of a model instance before it serves. TorchScript's profiling executor profiles
// a forward on its first call and optimises it on the second: the shipped models' first two
// requests took 26-200 ms each on the CPU, against 0.6-43 ms once warm (docs/performance.md,
// "Warm-up before a model serves"). Without a warm-up the first requests after every load
// pay that. A GPU instance with CUDA graphs also records a graph per input shape on the
// call after its warm-up calls (CudaGraphPolicy); warming every batch bucket at every
// padded length records them all before the first request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inference/model_config.pb.h"
#include "server/config/instance_spec.h"
#include "server/runtime/model_runner.h"
#include "server/tasks/task.h"

namespace gatescope {

struct WarmUpCall {
  int64_t batch = 1;
  int count = 1;       // calls of this batch size, in a row
  at::Tensor example;  // each of the batch's examples; undefined: the task's WarmUpExample()
  // > 0: the example (a sequence along its first dimension) cut or cyclically extended to
  // this many elements first, for a length the task pads calls to (PaddedLengths).
  int64_t length = 0;
};

// Reads the file a model_warmup input names (`input_data_file`, a path relative to the
// model's `warmup/` directory, as in Triton) and returns its first `max_bytes` bytes (all
// of a shorter file). Called on the loading thread, while SampleWarmUpCalls runs.
using WarmUpFileReader =
    std::function<absl::StatusOr<std::string>(const std::string& file, size_t max_bytes)>;

// The calls of config.pbtxt's model_warmup `samples`, in order, made once per model
// (Triton's semantics: `batch_size` copies of the sample per call, `count` calls, 0 meaning
// one). A sample's one input must be the model's (`task`'s KServe input: its name and data
// type, dims equal where the model fixes them). Image inputs get zeros, uniform [0, 1)
// values, or the first 4 x elements bytes of the input's file (FP32, row-major, little
// endian; a shorter file is refused), of the sample's dims. A text input, whose examples
// are piece ids, gets the task's own example for zero and random data (Triton, too, falls
// back from random to zero data for strings), and for a file the text it holds (one
// KServe BYTES element: a 4-byte little-endian length, then at most 16 MiB of text)
// tokenized as a request's. Only the bytes used are read. INVALID_ARGUMENT when a sample does not fit the model, its file does not fit
// the input, or its batch would hold more than 2^26 elements; a failure of `read_file`
// (needed only by samples with a file) as it says.
absl::StatusOr<std::vector<WarmUpCall>> SampleWarmUpCalls(
    const std::vector<::inference::ModelWarmup>& samples, const Task& task,
    const WarmUpFileReader& read_file = nullptr);

// What an instance runs before it serves: the model's `sample_calls` (SampleWarmUpCalls),
// or else batch 1 twice; then, on a GPU instance with CUDA graphs, each bucket up to
// `spec.max_batch_size` (CudaGraphPolicy::Buckets) as many times as it takes to record its
// graph, on the first sample's example or the task's own, at each of `lengths` (the
// lengths the task pads calls to, BatchAssembly::PaddedLengths; empty: at the example's
// own size). Other input sizes record on the requests that bring them.
std::vector<WarmUpCall> WarmUpCalls(const InstanceSpec& spec,
                                    std::vector<WarmUpCall> sample_calls,
                                    const std::vector<int64_t>& lengths = {});

// Runs `calls` on `runner`, each call's examples gathered by `assembly` as the instance
// gathers requests (with `shapes`). Blocks for the forwards; `runner` must not be in use
// by anything else yet. Returns the first failure (the model rejecting the example, say),
// after which no more calls are made; UNIMPLEMENTED when a call needs the task's example
// and it has none.
absl::Status WarmUp(ModelRunner& runner, const BatchAssembly& assembly,
                    const std::vector<WarmUpCall>& calls, const CallShapes& shapes = {});

}  // namespace gatescope
