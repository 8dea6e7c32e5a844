#include "server/app/library_logs.h"

#include <gtest/gtest.h>

#include "tests/mocks/fake_clock.h"

namespace gatescope {
namespace {

TEST(LogRateLimiter, OneLinePerIntervalThenTheDroppedCount) {
  testing::FakeClock clock;
  LogRateLimiter limiter(&clock, absl::Seconds(10));
  EXPECT_EQ(limiter.Admit("first"), "first");
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.Admit("flood").has_value());
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(limiter.Admit("still too soon").has_value());
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(limiter.Admit("next"), "next (1001 similar lines dropped)");
  clock.Advance(absl::Seconds(60));
  EXPECT_EQ(limiter.Admit("quiet"), "quiet");
}

}  // namespace
}  // namespace gatescope
