// Gather for variable-length token sequences: which examples share a model call and the
// call's padded inputs (token ids [B, T] padded with the model's pad id, attention mask
// [B, T]: true for a piece, false for padding). Pure ATen; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "server/tasks/batch_assembly.h"

namespace gatescope {

enum class TextPadding {
  // One call, padded to the longest example.
  kLongest,
  // One call per length bucket (up to 16 pieces, then powers of two), each padded to its
  // own longest example: a short text does not pay for a long one's length, whose cost
  // grows with its square in attention (docs/benchmarks.md measures both).
  kBuckets,
};

// The bucket of a sequence of `length` pieces under kBuckets.
int64_t LengthBucket(int64_t length);

// `examples`: INT64 [T_i] piece ids (T_i >= 1). Calls in order of their first member;
// members in order of arrival.
std::vector<GatheredBatch> GatherTokenSequences(const std::vector<at::Tensor>& examples,
                                                int64_t pad_id, TextPadding padding);

}  // namespace gatescope
