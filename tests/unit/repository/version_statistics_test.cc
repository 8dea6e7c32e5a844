// What KServe ModelStatistics reports for one version: inference statistics in examples,
// batch statistics in executions per batch size.
#include "server/repository/version_statistics.h"

#include <gtest/gtest.h>

namespace gatescope {
namespace {

TEST(VersionStatistics, CountsExamplesAndExecutions) {
  VersionStatistics s;
  // One call of 3 examples, batched as 2 + 1, and one failed single-example call.
  for (int i = 0; i < 3; ++i) s.Dequeued(absl::Microseconds(10 * (i + 1)));
  s.Executed(2, absl::Microseconds(4), absl::Microseconds(100), absl::Microseconds(6));
  s.Executed(1, absl::Microseconds(2), absl::Microseconds(70), absl::Microseconds(3));
  s.Finished(true, 3, absl::Milliseconds(1), absl::FromUnixMillis(5000));
  s.Finished(false, 1, absl::Microseconds(50), absl::FromUnixMillis(6000));
  const StatisticsSnapshot got = s.Snapshot();
  EXPECT_EQ(got.success.count, 3u);
  EXPECT_EQ(got.success.ns, 3u * 1000000u);
  EXPECT_EQ(got.fail.count, 1u);
  EXPECT_EQ(got.fail.ns, 50000u);
  EXPECT_EQ(got.queue.count, 3u);
  EXPECT_EQ(got.queue.ns, 60000u);
  EXPECT_EQ(got.inference_count, 3u);
  EXPECT_EQ(got.execution_count, 2u);
  // Each example carries its batch's compute time.
  EXPECT_EQ(got.compute_infer.count, 3u);
  EXPECT_EQ(got.compute_infer.ns, 2u * 100000u + 70000u);
  EXPECT_EQ(got.compute_input.ns, 2u * 4000u + 2000u);
  ASSERT_EQ(got.batches.size(), 2u);
  EXPECT_EQ(got.batches.at(2).compute_infer.count, 1u);
  EXPECT_EQ(got.batches.at(2).compute_infer.ns, 100000u);
  EXPECT_EQ(got.batches.at(1).compute_output.ns, 3000u);
  EXPECT_EQ(got.last_inference_ms, 6000u);
}

}  // namespace
}  // namespace gatescope
