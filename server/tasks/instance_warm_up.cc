#include "server/tasks/instance_warm_up.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/api/kserve_bytes.h"
#include "server/common/status_macros.h"
#include "server/runtime/cuda_graph_policy.h"

namespace gatescope {
namespace {

constexpr int kProfilingCalls = 2;  // TorchScript's profiling run, then its optimised plan
// Elements of one sample's whole batch (batch_size examples): 256 MiB of FP32.
constexpr int64_t kMaxSampleElements = int64_t{1} << 26;
// The longest text a warm-up file may hold (requests' texts are bounded far below, by the
// model's max_text_bytes).
constexpr size_t kMaxWarmUpTextBytes = size_t{16} << 20;

// The example of an input whose data is the file it names: `elements` FP32 values of
// `dims`, or one text.
absl::StatusOr<at::Tensor> FileExample(const std::string& which,
                                       const ::inference::ModelWarmup::Input& input,
                                       const std::vector<int64_t>& dims, int64_t elements,
                                       const Task& task, const WarmUpFileReader& read_file) {
  const std::string& file = input.input_data_file();
  if (!read_file) {
    return absl::FailedPreconditionError(
        absl::StrCat(which, ": input_data_file '", file, "' needs the model's warmup directory"));
  }
  const bool text = input.data_type() == ::inference::TYPE_STRING;
  // Text: the element and one byte more, which tells a longer file. FP32: the example's.
  const size_t needed = text ? sizeof(uint32_t) + kMaxWarmUpTextBytes + 1
                             : static_cast<size_t>(elements) * sizeof(float);
  absl::StatusOr<std::string> bytes = read_file(file, needed);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(), absl::StrCat(which, ": ", bytes.status().message()));
  }
  if (text) {
    // A text input is one BYTES element per example (its declared dims are [1]).
    const absl::StatusOr<std::vector<std::string_view>> elements = SplitRawBytes(*bytes);
    if (!elements.ok() || elements->size() != 1 || elements->front().size() > kMaxWarmUpTextBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, ": input_data_file '", file, "' holds ",
          bytes->size() == needed ? "more than " : "", bytes->size(),
          " bytes, not one BYTES element (a 4-byte little-endian length, then that many bytes, "
          "at most ", kMaxWarmUpTextBytes, ")"));
    }
    absl::StatusOr<at::Tensor> example = task.TextWarmUpExample(elements->front());
    if (!example.ok()) {
      return absl::Status(example.status().code(),
                          absl::StrCat(which, ": the text of '", file, "': ",
                                       example.status().message()));
    }
    return example;
  }
  // Triton's rule: the file holds at least one example's bytes, and those are its first.
  if (bytes->size() < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        which, ": input_data_file '", file, "' holds ", bytes->size(), " bytes; dims [",
        absl::StrJoin(dims, ","), "] of FP32 need ", needed));
  }
  try {
    at::Tensor example = at::empty(dims, at::kFloat);
    std::memcpy(example.data_ptr<float>(), bytes->data(), needed);  // little endian, as sent
    return example;
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(absl::StrCat(which, ": ", e.what()));
  }
}

// The example of one model_warmup sample (undefined: the task's own), or why it does not
// fit the model's input.
absl::StatusOr<at::Tensor> SampleExample(const ::inference::ModelWarmup& sample,
                                         const Task& task, const WarmUpFileReader& read_file) {
  const DeclaredTensor declared = task.Signature().input;
  const auto& [name, input] = *sample.inputs().begin();  // exactly one: MakeServingPlan
  const std::string which = absl::StrCat("model_warmup '", sample.name(), "'");
  if (name != declared.name) {
    return absl::InvalidArgumentError(
        absl::StrCat(which, ": the model's input is '", declared.name, "', not '", name, "'"));
  }
  if (input.data_type() != declared.type) {
    return absl::InvalidArgumentError(absl::StrCat(
        which, ": input '", name, "' is ", ::inference::DataType_Name(declared.type), ", not ",
        ::inference::DataType_Name(input.data_type())));
  }
  bool fits = input.dims_size() == static_cast<int>(declared.shape.size());
  const int64_t batch = std::max<int64_t>(1, sample.batch_size());
  int64_t elements = 1;  // of one example
  for (int i = 0; fits && i < input.dims_size(); ++i) {
    const int64_t d = input.dims(i);
    // Divided, not multiplied, so that no product can overflow.
    fits = d >= 1 && (declared.shape[i] == -1 || declared.shape[i] == d) &&
           d <= kMaxSampleElements / (elements * batch);
    if (fits) elements *= d;
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        which, ": dims [", absl::StrJoin(input.dims(), ","), "] do not fit input '", name,
        "' [", absl::StrJoin(declared.shape, ","), "] (-1: any size; at most ",
        kMaxSampleElements, " elements in a batch of ", sample.batch_size(), ")"));
  }
  const std::vector<int64_t> dims(input.dims().begin(), input.dims().end());
  if (input.has_input_data_file()) {
    return FileExample(which, input, dims, elements, task, read_file);
  }
  if (declared.type == ::inference::TYPE_STRING) return at::Tensor();
  try {
    return input.has_random_data() ? at::rand(dims, at::kFloat) : at::zeros(dims, at::kFloat);
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(absl::StrCat(which, ": ", e.what()));
  }
}

// `example` (a sequence along its first dimension, not empty) cut to `length` elements,
// or repeated from its start until it has them.
at::Tensor OfLength(const at::Tensor& example, int64_t length) {
  const int64_t have = example.size(0);
  if (have >= length) return example.narrow(0, 0, length);
  std::vector<int64_t> repeats(static_cast<size_t>(example.dim()), 1);
  repeats[0] = (length + have - 1) / have;
  return example.repeat(repeats).narrow(0, 0, length);
}

// WarmUp's calls; what throws is WarmUp's to catch.
absl::Status WarmUpOrThrow(ModelRunner& runner, const BatchAssembly& assembly,
                           const std::vector<WarmUpCall>& calls, const CallShapes& shapes) {
  at::Tensor own;  // the task's example, made when a call first needs it
  for (const WarmUpCall& call : calls) {
    if (!call.example.defined() && !own.defined()) {
      GS_ASSIGN_OR_RETURN(own, assembly.WarmUpExample());
    }
    at::Tensor example = call.example.defined() ? call.example : own;
    if (call.length > 0) {
      if (example.dim() < 1 || example.size(0) < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "warm-up at length ", call.length, ": the example is not a sequence"));
      }
      example = OfLength(example, call.length);
    }
    const std::vector<at::Tensor> examples(static_cast<size_t>(call.batch), example);
    GS_ASSIGN_OR_RETURN(std::vector<GatheredBatch> batches, assembly.Gather(examples, shapes));
    for (int i = 0; i < call.count; ++i) {
      for (const GatheredBatch& batch : batches) {
        absl::StatusOr<NamedTensors> out = runner.Predict(batch.inputs);
        if (!out.ok()) {
          return absl::Status(out.status().code(),
                              absl::StrCat("warm-up forward at batch ", batch.members.size(),
                                           ": ", out.status().message()));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<WarmUpCall>> SampleWarmUpCalls(
    const std::vector<::inference::ModelWarmup>& samples, const Task& task,
    const WarmUpFileReader& read_file) {
  std::vector<WarmUpCall> calls;
  for (const ::inference::ModelWarmup& sample : samples) {
    GS_ASSIGN_OR_RETURN(at::Tensor example, SampleExample(sample, task, read_file));
    calls.push_back({sample.batch_size(), std::max(1, static_cast<int>(sample.count())),
                     std::move(example)});
  }
  return calls;
}

std::vector<WarmUpCall> WarmUpCalls(const InstanceSpec& spec,
                                    std::vector<WarmUpCall> sample_calls,
                                    const std::vector<int64_t>& lengths) {
  std::vector<WarmUpCall> calls = std::move(sample_calls);
  const bool graphs = spec.kind == InstanceSpec::Kind::kGpu && spec.cuda_graphs;
  if (calls.empty() && !graphs) calls.push_back({1, kProfilingCalls, {}});
  if (!graphs) return calls;
  // Batch 1 is the first bucket, so its calls profile the forward too. The policy records
  // a shape on the call after its warm-up calls. The buckets run on the first sample's
  // example when there are samples (a model may refuse the zero example), else on the
  // task's own, at each length the task pads calls to (a text model's length buckets),
  // or else at that example's size: a model whose inputs vary in size otherwise (images
  // of any size) records its other shapes when requests bring them.
  const int to_record = CudaGraphPolicy::Limits{}.warm_up_calls_per_shape + 1;
  const at::Tensor example = calls.empty() ? at::Tensor() : calls.front().example;
  const std::vector<int64_t> each_length = lengths.empty() ? std::vector<int64_t>{0} : lengths;
  for (int64_t length : each_length) {
    for (int64_t bucket : CudaGraphPolicy::Buckets(spec.max_batch_size)) {
      calls.push_back({bucket, to_record, example, length});
    }
  }
  return calls;
}

absl::Status WarmUp(ModelRunner& runner, const BatchAssembly& assembly,
                    const std::vector<WarmUpCall>& calls, const CallShapes& shapes) {
  try {
    return WarmUpOrThrow(runner, assembly, calls, shapes);
  } catch (const std::exception& e) {  // runners and gathers answer with a status; in case
    return absl::InternalError(absl::StrCat("warm-up: ", e.what()));
  }
}

}  // namespace gatescope
