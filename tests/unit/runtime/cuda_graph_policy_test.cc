#include "server/runtime/cuda_graph_policy.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace gatescope {
namespace {

using Action = CudaGraphPolicy::Action;

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
}

TEST(CudaGraphPolicyTest, EachShapeRunsEagerlyThenIsRecordedThenReplayed) {
  CudaGraphPolicy policy({/*eager_calls_per_shape=*/2, /*max_graphs=*/8});
  EXPECT_EQ(policy.Next("a"), Action::kEager);
  EXPECT_EQ(policy.Next("b"), Action::kEager);  // shapes are counted apart
  EXPECT_EQ(policy.Next("a"), Action::kEager);
  EXPECT_EQ(policy.Next("a"), Action::kRecord);
  // A recording cut short by the model's own error: the next call records again.
  EXPECT_EQ(policy.Next("a"), Action::kRecord);
  policy.Recorded("a");
  EXPECT_EQ(policy.graphs(), 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(policy.Next("a"), Action::kReplay);
  EXPECT_EQ(policy.Next("b"), Action::kEager);
  EXPECT_EQ(policy.Next("b"), Action::kRecord);
}

TEST(CudaGraphPolicyTest, NoEagerCallsRecordsTheFirstCall) {
  CudaGraphPolicy policy({/*eager_calls_per_shape=*/0, /*max_graphs=*/8});
  EXPECT_EQ(policy.Next("a"), Action::kRecord);
}

TEST(CudaGraphPolicyTest, ShapesBeyondTheBoundRunEagerlyAndRecordedOnesStillReplay) {
  CudaGraphPolicy policy({/*eager_calls_per_shape=*/0, /*max_graphs=*/2});
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
  CudaGraphPolicy policy({/*eager_calls_per_shape=*/0, /*max_graphs=*/8});
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

}  // namespace
}  // namespace gatescope
