// The top-k classes of a classifier's "logits", shared by the tasks that classify (images,
// text): the request's top_k and the response's ClassScore list.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "server/config/model_config.h"
#include "server/postprocess/classification.h"
#include "server/runtime/named_tensors.h"

namespace gatescope {

inline constexpr int kDefaultTopK = 5;

// A request's top_k: 0 means kDefaultTopK; negative is INVALID_ARGUMENT.
inline absl::StatusOr<int> TopKOf(int32_t requested) {
  if (requested < 0) return absl::InvalidArgumentError("top_k must be >= 0");
  return requested == 0 ? kDefaultTopK : requested;
}

// The top `k` classes of one example's "logits" into `response->classes` (a gatescope.v1
// PredictResponse or ExplainResponse).
template <typename Response>
absl::Status FillClasses(const ModelConfig& config, const NamedTensors& outputs, int k,
                         Response* response) {
  auto logits = outputs.find("logits");
  if (logits == outputs.end()) return absl::InternalError("model returned no 'logits'");
  auto classes = TopKClasses(logits->second, config.labels(), k);
  if (!classes.ok()) return classes.status();
  for (const auto& c : *classes) {
    auto* out = response->add_classes();
    out->set_label(c.label);
    out->set_index(c.index);
    out->set_probability(c.probability);
  }
  return absl::OkStatus();
}

}  // namespace gatescope
