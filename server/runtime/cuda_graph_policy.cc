#include "server/runtime/cuda_graph_policy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gatescope {

std::string CudaGraphPolicy::ShapeKey(const ModelInputs& inputs) {
  std::string key;
  for (const at::Tensor& t : inputs) {
    if (!key.empty()) key += ';';
    absl::StrAppend(&key, c10::toString(t.scalar_type()), "[", absl::StrJoin(t.sizes(), ","),
                    "]");
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
  int& calls = eager_calls_[key];
  if (calls < limits_.eager_calls_per_shape) {
    ++calls;
    return Action::kEager;
  }
  return Action::kRecord;
}

}  // namespace gatescope
