#include "server/runtime/cuda_graph_policy.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace gatescope {
namespace {

using Action = CudaGraphPolicy::Action;

TEST(CudaGraphPolicyTest, BatchesArePaddedToAPowerOfTwoWithinTheLargestBatch) {
  std::vector<int64_t> got;
  for (int64_t b : {1, 2, 3, 5, 16, 17, 33, 48, 64}) got.push_back(CudaGraphPolicy::Bucket(b, 64));
  EXPECT_EQ(got, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 64, 64}));
  EXPECT_EQ(CudaGraphPolicy::Bucket(40, 48), 48);  // capped by max_batch_size
  EXPECT_EQ(CudaGraphPolicy::Bucket(3, 1), 3);     // never below the batch
  EXPECT_EQ(CudaGraphPolicy::Bucket(1, 1), 1);
}

TEST(CudaGraphPolicyTest, BucketsListEverySizeABatchIsPaddedTo) {
  using Sizes = std::vector<int64_t>;
  EXPECT_EQ(CudaGraphPolicy::Buckets(1), (Sizes{1}));
  EXPECT_EQ(CudaGraphPolicy::Buckets(6), (Sizes{1, 2, 4, 6}));
  EXPECT_EQ(CudaGraphPolicy::Buckets(8), (Sizes{1, 2, 4, 8}));
  EXPECT_EQ(CudaGraphPolicy::Buckets(0), (Sizes{1}));
  // Exactly the sizes Bucket pads to.
  for (int64_t max : {1, 6, 8, 48}) {
    std::set<int64_t> padded;
    for (int64_t b = 1; b <= max; ++b) padded.insert(CudaGraphPolicy::Bucket(b, max));
    const Sizes buckets = CudaGraphPolicy::Buckets(max);
    EXPECT_EQ(Sizes(padded.begin(), padded.end()), buckets) << max;
  }
}

TEST(CudaGraphPolicyTest, OnlyInputsLeadingWithOneBatchSizeHaveACommonBatch) {
  EXPECT_EQ(CudaGraphPolicy::CommonBatch({at::zeros({3, 2}), at::zeros({3}, at::kLong)}), 3);
  EXPECT_EQ(CudaGraphPolicy::CommonBatch({at::zeros({3, 2}), at::zeros({5, 2})}), -1);
  EXPECT_EQ(CudaGraphPolicy::CommonBatch({at::zeros({3, 2}), at::zeros({})}), -1);
  EXPECT_EQ(CudaGraphPolicy::CommonBatch({at::zeros({}), at::zeros({3})}), -1);
  EXPECT_EQ(CudaGraphPolicy::CommonBatch({at::zeros({0, 2})}), -1);
  EXPECT_EQ(CudaGraphPolicy::CommonBatch({}), -1);
}

TEST(CudaGraphPolicyTest, ShapeKeyNamesEveryInputsDtypeAndSizes) {
  EXPECT_EQ(CudaGraphPolicy::ShapeKey({at::zeros({64, 1, 28, 28}),
                                       at::zeros({64, 16}, at::kLong)}),
            "Float[64,1,28,28];Long[64,16]");
  EXPECT_NE(CudaGraphPolicy::ShapeKey({at::zeros({2, 3})}),
            CudaGraphPolicy::ShapeKey({at::zeros({3, 2})}));
  EXPECT_NE(CudaGraphPolicy::ShapeKey({at::zeros({2, 3})}),
            CudaGraphPolicy::ShapeKey({at::zeros({2, 3}, at::kDouble)}));
  EXPECT_NE(CudaGraphPolicy::ShapeKey({at::zeros({2, 3}), at::zeros({2})}),
            CudaGraphPolicy::ShapeKey({at::zeros({2, 3})}));
  // The padded inputs' key, without padding them.
  const ModelInputs three{at::zeros({3, 1, 4}), at::zeros({3, 5}, at::kLong)};
  EXPECT_EQ(CudaGraphPolicy::ShapeKey(three, 4), CudaGraphPolicy::ShapeKey(PadBatch(three, 4)));
  EXPECT_EQ(CudaGraphPolicy::ShapeKey(three, 4), "Float[4,1,4];Long[4,5]");
}

TEST(CudaGraphPolicyTest, EachShapeWarmsUpThenIsRecordedThenReplayed) {
  CudaGraphPolicy policy({/*warm_up_calls_per_shape=*/2, /*max_graphs=*/8});
  EXPECT_EQ(policy.Next("a"), Action::kWarmUp);
  EXPECT_EQ(policy.Next("b"), Action::kWarmUp);  // shapes are counted apart
  EXPECT_EQ(policy.Next("a"), Action::kWarmUp);
  EXPECT_EQ(policy.Next("a"), Action::kRecord);
  // A recording cut short by the model's own error: the next call records again.
  EXPECT_EQ(policy.Next("a"), Action::kRecord);
  policy.Recorded("a");
  EXPECT_EQ(policy.graphs(), 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(policy.Next("a"), Action::kReplay);
  EXPECT_EQ(policy.Next("b"), Action::kWarmUp);
  EXPECT_EQ(policy.Next("b"), Action::kRecord);
}

TEST(CudaGraphPolicyTest, NoWarmUpRecordsTheFirstCall) {
  CudaGraphPolicy policy({/*warm_up_calls_per_shape=*/0, /*max_graphs=*/8});
  EXPECT_EQ(policy.Next("a"), Action::kRecord);
}

TEST(CudaGraphPolicyTest, ShapesBeyondTheBoundRunEagerlyAndRecordedOnesStillReplay) {
  CudaGraphPolicy policy({/*warm_up_calls_per_shape=*/0, /*max_graphs=*/2});
  for (const char* key : {"a", "b"}) {
    ASSERT_EQ(policy.Next(key), Action::kRecord);
    policy.Recorded(key);
  }
  EXPECT_FALSE(policy.full());
  EXPECT_EQ(policy.Next("c"), Action::kEager);
  EXPECT_EQ(policy.Next("c"), Action::kEager);
  EXPECT_TRUE(policy.full());
  EXPECT_EQ(policy.Next("a"), Action::kReplay);
  EXPECT_EQ(policy.Next("b"), Action::kReplay);
}

TEST(CudaGraphPolicyTest, AFailedRecordingStopsRecordingButKeepsRecordedGraphs) {
  CudaGraphPolicy policy({/*warm_up_calls_per_shape=*/0, /*max_graphs=*/8});
  ASSERT_EQ(policy.Next("a"), Action::kRecord);
  policy.Recorded("a");
  ASSERT_EQ(policy.Next("b"), Action::kRecord);
  policy.Failed("operation not permitted when stream is capturing");
  EXPECT_TRUE(policy.failed());
  EXPECT_EQ(policy.failure(), "operation not permitted when stream is capturing");
  EXPECT_EQ(policy.Next("b"), Action::kEager);
  EXPECT_EQ(policy.Next("c"), Action::kEager);
  EXPECT_EQ(policy.Next("a"), Action::kReplay);
}

TEST(PadBatchTest, RepeatsTheFirstRowOfEveryInput) {
  const at::Tensor images = at::arange(3 * 4, at::kFloat).view({3, 2, 2});
  const at::Tensor ids = at::arange(3 * 5, at::kLong).view({3, 5});
  const ModelInputs padded = PadBatch({images, ids}, 8);
  ASSERT_EQ(padded.size(), 2u);
  EXPECT_EQ(padded[0].sizes(), (std::vector<int64_t>{8, 2, 2}));
  EXPECT_EQ(padded[1].sizes(), (std::vector<int64_t>{8, 5}));
  EXPECT_EQ(padded[1].scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(padded[0].narrow(0, 0, 3), images));
  EXPECT_TRUE(at::equal(padded[1].narrow(0, 0, 3), ids));
  for (int64_t row = 3; row < 8; ++row) {
    EXPECT_TRUE(at::equal(padded[0][row], images[0]));
    EXPECT_TRUE(at::equal(padded[1][row], ids[0]));
  }
  // Already that size: the very same tensors.
  const ModelInputs same = PadBatch({images}, 3);
  EXPECT_TRUE(same[0].is_same(images));
}

TEST(FirstRowsTest, CutsOutputsOfThePaddedSizeAndLeavesTheRest) {
  c10::Dict<std::string, at::Tensor> outputs;
  outputs.insert("logits", at::arange(8 * 3, at::kFloat).view({8, 3}));
  outputs.insert("table", at::zeros({10}));  // not batch-leading: left for the runner's check
  const c10::IValue cut = FirstRows(c10::IValue(outputs), 3, 8);
  const auto dict = cut.toGenericDict();
  const at::Tensor logits = dict.at("logits").toTensor();
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_TRUE(at::equal(logits, at::arange(9, at::kFloat).view({3, 3})));
  EXPECT_EQ(dict.at("table").toTensor().size(0), 10);
  // Unpadded, or not a dict: as it is.
  EXPECT_TRUE(FirstRows(c10::IValue(outputs), 8, 8).toGenericDict().at("logits").toTensor().is_same(
      outputs.at("logits")));
  EXPECT_EQ(FirstRows(c10::IValue(int64_t{7}), 3, 8).toInt(), 7);
}

}  // namespace
}  // namespace gatescope
