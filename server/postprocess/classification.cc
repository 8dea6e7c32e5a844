#include "server/postprocess/classification.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gatescope {

absl::StatusOr<std::vector<ClassProbability>> TopKClasses(
    const at::Tensor& logits, const google::protobuf::RepeatedPtrField<std::string>& labels,
    int k) {
  if (logits.dim() != 1 || logits.size(0) != labels.size()) {
    return absl::InternalError(absl::StrCat("logits of shape ", logits.dim() == 1 ? logits.size(0) : -1,
                                            " do not match ", labels.size(), " labels"));
  }
  const at::Tensor probs = at::softmax(logits.to(at::kFloat), 0).contiguous();
  const int n = static_cast<int>(probs.size(0));
  const int take = std::max(0, std::min(k, n));
  const at::Tensor order = std::get<1>(probs.topk(take, 0, /*largest=*/true, /*sorted=*/true));
  std::vector<ClassProbability> out;
  out.reserve(take);
  for (int i = 0; i < take; ++i) {
    const int idx = static_cast<int>(order[i].item<int64_t>());
    out.push_back({idx, labels.Get(idx), probs[idx].item<float>()});
  }
  return out;
}

}  // namespace gatescope
