#include "server/runtime/cuda_graph_policy.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gatescope {

int64_t CudaGraphPolicy::CommonBatch(const ModelInputs& inputs) {
  if (inputs.empty() || inputs[0].dim() == 0 || inputs[0].size(0) < 1) return -1;
  const int64_t batch = inputs[0].size(0);
  for (const at::Tensor& t : inputs) {
    if (t.dim() == 0 || t.size(0) != batch) return -1;
  }
  return batch;
}

int64_t CudaGraphPolicy::Bucket(int64_t batch, int64_t max_batch) {
  if (batch < 1) return batch;
  int64_t bucket = 1;
  while (bucket < batch) bucket *= 2;
  return std::max(batch, std::min(bucket, max_batch));
}

std::vector<int64_t> CudaGraphPolicy::Buckets(int64_t max_batch) {
  const int64_t largest = std::max<int64_t>(1, max_batch);
  std::vector<int64_t> buckets;
  for (int64_t bucket = 1; bucket < largest; bucket *= 2) buckets.push_back(bucket);
  buckets.push_back(largest);
  return buckets;
}

std::string CudaGraphPolicy::ShapeKey(const ModelInputs& inputs, int64_t batch) {
  std::string key;
  for (const at::Tensor& t : inputs) {
    if (!key.empty()) key += ';';
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    if (batch >= 0 && !sizes.empty()) sizes[0] = batch;
    absl::StrAppend(&key, c10::toString(t.scalar_type()), "[", absl::StrJoin(sizes, ","), "]");
  }
  return key;
}

CudaGraphPolicy::Action CudaGraphPolicy::Next(const std::string& key) {
  if (recorded_.count(key) > 0) return Action::kReplay;
  if (failed()) return Action::kEager;
  if (graphs() >= limits_.max_graphs) {
    full_ = true;
    return Action::kEager;
  }
  int& calls = warm_up_calls_[key];
  if (calls < limits_.warm_up_calls_per_shape) {
    ++calls;
    return Action::kWarmUp;
  }
  return Action::kRecord;
}

ModelInputs PadBatch(const ModelInputs& inputs, int64_t batch) {
  ModelInputs out;
  out.reserve(inputs.size());
  for (const at::Tensor& t : inputs) {
    if (t.dim() == 0 || t.size(0) >= batch || t.size(0) == 0) {
      out.push_back(t);
      continue;
    }
    std::vector<int64_t> extra(t.sizes().begin(), t.sizes().end());
    extra[0] = batch - t.size(0);
    out.push_back(at::cat({t, t.narrow(0, 0, 1).expand(extra)}));
  }
  return out;
}

c10::IValue FirstRows(const c10::IValue& outputs, int64_t batch, int64_t padded) {
  if (batch == padded || !outputs.isGenericDict()) return outputs;
  const c10::impl::GenericDict dict = outputs.toGenericDict();
  c10::impl::GenericDict cut(dict.keyType(), dict.valueType());
  cut.reserve(dict.size());
  for (const auto& entry : dict) {
    c10::IValue value = entry.value();
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (t.dim() > 0 && t.size(0) == padded) value = t.narrow(0, 0, batch);
    }
    cut.insert(entry.key(), std::move(value));
  }
  return cut;
}

}  // namespace gatescope
