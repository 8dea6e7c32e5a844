// Turns classifier logits into ranked class probabilities. Pure, thread-safe.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"

namespace gatescope {

struct ClassProbability {
  int index = 0;
  std::string label;
  float probability = 0.f;
};

// `logits` is one example's [num_classes] vector. Returns the min(k, num_classes) most
// probable classes (softmax), highest first; equal probabilities by class index, and NaN
// above any number (as torch.topk ranks it). INTERNAL if the label count differs.
absl::StatusOr<std::vector<ClassProbability>> TopKClasses(
    const at::Tensor& logits, const google::protobuf::RepeatedPtrField<std::string>& labels,
    int k);

}  // namespace gatescope
