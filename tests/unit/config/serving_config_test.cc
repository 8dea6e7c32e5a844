#include "server/config/serving_config.h"

#include <gtest/gtest.h>

#include <string>

namespace gatescope {
namespace {

TEST(ServingConfigTest, TritonStyleFieldsBecomeAPlan) {
  auto parsed = ParseServingConfig(R"pb(
    max_batch_size: 32
    dynamic_batching {
      preferred_batch_size: [ 16, 8 ]
      max_queue_delay_microseconds: 2500
      priority_levels: 2
      default_priority_level: 2
      default_queue_policy {
        timeout_action: DELAY
        default_timeout_microseconds: 100000
        allow_timeout_override: true
        max_queue_size: 10
      }
    }
    instance_group { count: 2 }
    instance_group { count: 1 })pb");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto plan = MakeServingPlan(ServingDefaults(), /*model_max_batch_size=*/64, *parsed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->instances, 3);
  const DynamicBatchingConfig& b = plan->batching;
  EXPECT_EQ(b.max_batch_size, 32);
  EXPECT_EQ(b.preferred_batch_sizes, (std::vector<int>{8, 16}));
  EXPECT_EQ(b.max_queue_delay, absl::Microseconds(2500));
  EXPECT_EQ(b.priority_levels, 2);
  EXPECT_EQ(b.default_priority_level, 2);
  EXPECT_EQ(b.queue_policy.timeout_action, QueuePolicy::TimeoutAction::kDelay);
  EXPECT_EQ(b.queue_policy.default_timeout, absl::Milliseconds(100));
  EXPECT_TRUE(b.queue_policy.allow_timeout_override);
  EXPECT_EQ(b.queue_policy.max_queue_size, 10);
}

TEST(ServingConfigTest, DefaultsWithoutConfigFile) {
  ServingDefaults d;
  d.max_batch_size = 16;
  d.max_queue_delay = absl::Microseconds(300);
  d.instances = 2;
  auto plan = MakeServingPlan(d, /*model_max_batch_size=*/8, ParseServingConfig("").value());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->batching.max_batch_size, 8);  // capped by the model
  EXPECT_EQ(plan->batching.max_queue_delay, absl::Microseconds(300));
  EXPECT_EQ(plan->batching.queue_policy.max_queue_size, 256);
  EXPECT_EQ(plan->batching.queue_policy.default_timeout, absl::InfiniteDuration());
  EXPECT_EQ(plan->instances, 2);
}

TEST(ServingConfigTest, RejectsBadText) {
  auto bad = ParseServingConfig("dynamic_batching { max_queue_delay: 5 }");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("line 1"), std::string::npos);
  EXPECT_FALSE(ParseServingConfig("max_batch_size: ten").ok());
}

TEST(ServingConfigTest, RejectsBadValues) {
  auto preferred = ParseServingConfig(
      "max_batch_size: 4 dynamic_batching { preferred_batch_size: 8 }").value();
  EXPECT_FALSE(MakeServingPlan(ServingDefaults(), 0, preferred).ok());
  auto instances = ParseServingConfig("instance_group { count: 0 }").value();
  EXPECT_FALSE(MakeServingPlan(ServingDefaults(), 0, instances).ok());
  auto gpu = ParseServingConfig("instance_group { count: 1 kind: KIND_GPU }").value();
  EXPECT_FALSE(MakeServingPlan(ServingDefaults(), 0, gpu).ok());
  auto cpu = ParseServingConfig("instance_group { count: 2 kind: KIND_CPU }").value();
  EXPECT_EQ(MakeServingPlan(ServingDefaults(), 0, cpu).value().instances, 2);
  auto priority = ParseServingConfig("dynamic_batching { priority_levels: 2 }").value();
  EXPECT_FALSE(MakeServingPlan(ServingDefaults(), 0, priority).ok());
}

}  // namespace
}  // namespace gatescope
