#include "server/tasks/text_batches.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <map>

namespace gatescope {

int64_t LengthBucket(int64_t length) {
  int64_t bucket = 16;
  while (bucket < length) bucket *= 2;
  return bucket;
}

std::vector<int64_t> WholeBucketLengths(int64_t max_length) {
  std::vector<int64_t> lengths;
  for (int64_t bucket = LengthBucket(1); bucket < max_length; bucket = LengthBucket(bucket + 1)) {
    lengths.push_back(bucket);
  }
  lengths.push_back(std::max<int64_t>(1, max_length));
  return lengths;
}

std::vector<GatheredBatch> GatherTokenSequences(const std::vector<at::Tensor>& examples,
                                                int64_t pad_id, TextPadding padding,
                                                int64_t max_length) {
  std::vector<GatheredBatch> batches;
  std::map<int64_t, size_t> by_bucket;  // bucket -> index into batches
  for (size_t i = 0; i < examples.size(); ++i) {
    const int64_t key =
        padding == TextPadding::kLongest ? 0 : LengthBucket(examples[i].size(0));
    auto [it, added] = by_bucket.emplace(key, batches.size());
    if (added) batches.emplace_back();
    batches[it->second].members.push_back(i);
  }
  for (GatheredBatch& batch : batches) {
    int64_t longest = 0;
    for (size_t i : batch.members) longest = std::max(longest, examples[i].size(0));
    if (padding == TextPadding::kWholeBuckets) {
      const int64_t bucket = LengthBucket(longest);
      longest = std::max(longest, max_length > 0 ? std::min(bucket, max_length) : bucket);
    }
    const int64_t rows = static_cast<int64_t>(batch.members.size());
    at::Tensor ids = at::full({rows, longest}, pad_id, at::kLong);
    at::Tensor mask = at::zeros({rows, longest}, at::kBool);
    for (int64_t r = 0; r < rows; ++r) {
      const at::Tensor& example = examples[batch.members[r]];
      const int64_t length = example.size(0);
      ids[r].narrow(0, 0, length).copy_(example);
      mask[r].narrow(0, 0, length).fill_(true);
    }
    batch.inputs = {ids, mask};
  }
  return batches;
}

}  // namespace gatescope
