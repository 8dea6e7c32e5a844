#include "server/postprocess/classification.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/softmax.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace gatescope {

absl::StatusOr<std::vector<ClassProbability>> TopKClasses(
    const at::Tensor& logits, const google::protobuf::RepeatedPtrField<std::string>& labels,
    int k) {
  if (logits.dim() != 1 || logits.size(0) != labels.size()) {
    return absl::InternalError(absl::StrCat("logits of shape ", logits.dim() == 1 ? logits.size(0) : -1,
                                            " do not match ", labels.size(), " labels"));
  }
  const at::Tensor probs = at::softmax(logits.to(at::kCPU, at::kFloat), 0).contiguous();
  const float* p = probs.data_ptr<float>();
  const int n = static_cast<int>(probs.size(0));
  const int take = std::max(0, std::min(k, n));
  // Ranked here rather than with Tensor::topk and per-element reads: each of those is a
  // dispatched operation, several microseconds per response for a handful of classes.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  const auto before = [p](int a, int b) {
    const bool nan_a = std::isnan(p[a]), nan_b = std::isnan(p[b]);
    if (nan_a != nan_b) return nan_a;
    if (!nan_a && p[a] != p[b]) return p[a] > p[b];
    return a < b;
  };
  std::partial_sort(order.begin(), order.begin() + take, order.end(), before);
  std::vector<ClassProbability> out;
  out.reserve(take);
  for (int i = 0; i < take; ++i) out.push_back({order[i], labels.Get(order[i]), p[order[i]]});
  return out;
}

}  // namespace gatescope
