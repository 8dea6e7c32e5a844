#include "server/tasks/instance_warm_up.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/runtime/cuda_graph_policy.h"

namespace gatescope {
namespace {

constexpr int kProfilingCalls = 2;  // TorchScript's profiling run, then its optimised plan
constexpr int64_t kMaxSampleElements = int64_t{1} << 26;  // 256 MiB of FP32 per example

// The example of one model_warmup sample (undefined: the task's own), or why it does not
// fit the model's input.
absl::StatusOr<at::Tensor> SampleExample(const ::inference::ModelWarmup& sample,
                                         const Task& task) {
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
  int64_t elements = 1;
  for (int i = 0; fits && i < input.dims_size(); ++i) {
    fits = input.dims(i) >= 1 && (declared.shape[i] == -1 || declared.shape[i] == input.dims(i));
    elements *= fits ? input.dims(i) : 1;
    fits = fits && elements <= kMaxSampleElements;
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        which, ": dims [", absl::StrJoin(input.dims(), ","), "] do not fit input '", name,
        "' [", absl::StrJoin(declared.shape, ","), "] (-1: any size; at most ",
        kMaxSampleElements, " elements)"));
  }
  if (declared.type == ::inference::TYPE_STRING) return at::Tensor();
  const std::vector<int64_t> dims(input.dims().begin(), input.dims().end());
  return input.has_random_data() ? at::rand(dims, at::kFloat) : at::zeros(dims, at::kFloat);
}

}  // namespace

absl::StatusOr<std::vector<WarmUpCall>> WarmUpCalls(
    const InstanceSpec& spec, const std::vector<::inference::ModelWarmup>& samples,
    const Task& task) {
  std::vector<WarmUpCall> calls;
  for (const ::inference::ModelWarmup& sample : samples) {
    GS_ASSIGN_OR_RETURN(at::Tensor example, SampleExample(sample, task));
    calls.push_back({sample.batch_size(), std::max(1, static_cast<int>(sample.count())),
                     std::move(example)});
  }
  const bool graphs = spec.kind == InstanceSpec::Kind::kGpu && spec.cuda_graphs;
  if (samples.empty() && !graphs) calls.push_back({1, kProfilingCalls, {}});
  if (!graphs) return calls;
  // Batch 1 is the first bucket, so its calls profile the forward too. The policy records a shape on the call after its warm-up calls, at the buckets
  // CudaGraphPolicy::Bucket pads to: powers of two below the largest batch, then the largest.
  const int to_record = CudaGraphPolicy::Limits{}.warm_up_calls_per_shape + 1;
  const int64_t largest = std::max(1, spec.max_batch_size);
  for (int64_t bucket = 1;; bucket *= 2) {
    calls.push_back({std::min(bucket, largest), to_record, {}});
    if (bucket >= largest) break;
  }
  return calls;
}

absl::Status WarmUp(ModelRunner& runner, const BatchAssembly& assembly,
                    const std::vector<WarmUpCall>& calls) {
  at::Tensor own;  // the task's example, made when a call first needs it
  for (const WarmUpCall& call : calls) {
    if (!call.example.defined() && !own.defined()) {
      GS_ASSIGN_OR_RETURN(own, assembly.WarmUpExample());
    }
    const at::Tensor& example = call.example.defined() ? call.example : own;
    const std::vector<at::Tensor> examples(static_cast<size_t>(call.batch), example);
    GS_ASSIGN_OR_RETURN(std::vector<GatheredBatch> batches, assembly.Gather(examples));
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

}  // namespace gatescope
