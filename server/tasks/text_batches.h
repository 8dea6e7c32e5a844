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
  // One call per length bucket, each padded to its bucket's full length (but at most
  // `max_length`, and never below its longest example): calls repeat a few shapes, for
  // GPU instances that record a CUDA graph per input shape (CallShapes).
  kWholeBuckets,
};

// The bucket of a sequence of `length` pieces under kBuckets.
int64_t LengthBucket(int64_t length);

// The lengths kWholeBuckets pads calls to when no example is longer than `max_length`
// (>= 1), ascending: the buckets below it, then `max_length`.
std::vector<int64_t> WholeBucketLengths(int64_t max_length);

// `examples`: INT64 [T_i] piece ids (T_i >= 1). Calls in order of their first member;
// members in order of arrival. `max_length` (the longest text the model reads; 0: no
// bound) bounds kWholeBuckets' padding; the other paddings ignore it.
std::vector<GatheredBatch> GatherTokenSequences(const std::vector<at::Tensor>& examples,
                                                int64_t pad_id, TextPadding padding,
                                                int64_t max_length = 0);

}  // namespace gatescope
