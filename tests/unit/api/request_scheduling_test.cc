#include "server/api/request_scheduling.h"

#include <gtest/gtest.h>

namespace gatescope {
namespace {

TEST(RequestSchedulingTest, BothApisAreCheckedTheSameWay) {
  v1::PredictRequest v1_request;
  v1_request.set_priority(2);
  v1_request.set_timeout_microseconds(500);
  auto a = SchedulingOf(v1_request);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->priority, 2);
  EXPECT_EQ(a->timeout, absl::Microseconds(500));

  ::inference::ModelInferRequest kserve;
  (*kserve.mutable_parameters())["priority"].set_int64_param(2);
  (*kserve.mutable_parameters())["timeout"].set_int64_param(500);
  auto b = SchedulingOf(kserve);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->priority, a->priority);
  EXPECT_EQ(b->timeout, a->timeout);

  v1_request.set_priority(257);
  EXPECT_EQ(SchedulingOf(v1_request).status().code(), absl::StatusCode::kInvalidArgument);
  v1_request.set_priority(0);
  v1_request.set_timeout_microseconds(uint64_t{1} << 41);
  EXPECT_EQ(SchedulingOf(v1_request).status().code(), absl::StatusCode::kInvalidArgument);
  (*kserve.mutable_parameters())["timeout"].set_int64_param(-1);
  EXPECT_EQ(SchedulingOf(kserve).status().code(), absl::StatusCode::kInvalidArgument);
  (*kserve.mutable_parameters())["timeout"].set_string_param("5");
  EXPECT_EQ(SchedulingOf(kserve).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SchedulingOf(::inference::ModelInferRequest()).value().priority, 0);
}

}  // namespace
}  // namespace gatescope
