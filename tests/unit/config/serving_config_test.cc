#include "server/config/serving_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

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
  EXPECT_EQ(plan->instances.size(), 3u);
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
  EXPECT_EQ(QueueCapacity(b), 20);  // two levels of ten
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
  EXPECT_EQ(plan->instances.size(), 2u);
  EXPECT_FALSE(plan->batching.release_when_arrivals_are_sparse);
  d.early_batch_release = true;  // a server default, with or without a config file
  EXPECT_TRUE(MakeServingPlan(d, 8, ParseServingConfig("").value())
                  ->batching.release_when_arrivals_are_sparse);
  EXPECT_TRUE(MakeServingPlan(d, 8, ParseServingConfig(
                                        "dynamic_batching { max_queue_delay_microseconds: 5 }")
                                        .value())
                  ->batching.release_when_arrivals_are_sparse);
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
  auto instances = ParseServingConfig("instance_group { count: -1 }").value();
  EXPECT_FALSE(MakeServingPlan(ServingDefaults(), 0, instances).ok());
  auto unset = ParseServingConfig("instance_group { kind: KIND_CPU }").value();
  EXPECT_EQ(MakeServingPlan(ServingDefaults(), 0, unset).value().instances.size(), 1u);
  auto gpu = ParseServingConfig("instance_group { count: 1 kind: KIND_GPU }").value();
  EXPECT_EQ(MakeServingPlan(ServingDefaults(), 0, gpu).status().code(),
            absl::StatusCode::kUnavailable);  // no GPU visible
  auto cpu = ParseServingConfig("instance_group { count: 2 kind: KIND_CPU }").value();
  EXPECT_EQ(MakeServingPlan(ServingDefaults(), 0, cpu).value().instances.size(), 2u);
  auto model = ParseServingConfig("instance_group { kind: KIND_MODEL }").value();
  EXPECT_EQ(MakeServingPlan(ServingDefaults(), 0, model).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto too_many = ParseServingConfig("instance_group { count: 65 }").value();
  EXPECT_FALSE(MakeServingPlan(ServingDefaults(), 0, too_many).ok());
  auto priority = ParseServingConfig("dynamic_batching { priority_levels: 2 }").value();
  EXPECT_FALSE(MakeServingPlan(ServingDefaults(), 0, priority).ok());
}

TEST(ServingConfigTest, InstanceGroupsFollowTritonOnDevices) {
  DeviceInventory two_gpus{2, ""};
  // count instances on each listed GPU, in order.
  auto listed = ParseServingConfig(
      "instance_group { name: \"g\" count: 2 kind: KIND_GPU gpus: [1, 0] }").value();
  auto plan = MakeServingPlan(ServingDefaults(), 0, listed, two_gpus).value();
  ASSERT_EQ(plan.instances.size(), 4u);
  std::vector<int> devices;
  for (const InstanceSpec& s : plan.instances) {
    EXPECT_EQ(s.kind, InstanceSpec::Kind::kGpu);
    devices.push_back(s.device);
  }
  EXPECT_EQ(devices, (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(plan.instances[3].name, "g_3");
  EXPECT_EQ(DeviceName(plan.instances[0]), "GPU 1");
  // No gpus listed: every visible GPU; KIND_AUTO is GPU when there is one, else CPU.
  auto every = ParseServingConfig("instance_group { kind: KIND_GPU }").value();
  EXPECT_EQ(MakeServingPlan(ServingDefaults(), 0, every, two_gpus).value().instances.size(), 2u);
  auto automatic = ParseServingConfig("instance_group { kind: KIND_AUTO count: 3 }").value();
  auto on_gpu = MakeServingPlan(ServingDefaults(), 0, automatic, two_gpus).value();
  EXPECT_EQ(on_gpu.groups[0].kind(), ::inference::ModelInstanceGroup::KIND_GPU);
  EXPECT_EQ(on_gpu.instances.size(), 6u);
  auto on_cpu = MakeServingPlan(ServingDefaults(), 0, automatic, DeviceInventory{}).value();
  EXPECT_EQ(on_cpu.groups[0].kind(), ::inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(on_cpu.instances.size(), 3u);
  EXPECT_EQ(DeviceName(on_cpu.instances[0]), "CPU");
  // Without a visible GPU, the reason the runtime gives is kept.
  auto none = MakeServingPlan(ServingDefaults(), 0, every, DeviceInventory{0, "no CUDA here"});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("no CUDA here"), absl::string_view::npos);
  auto cpu_with_gpus = ParseServingConfig("instance_group { kind: KIND_CPU gpus: [0] }").value();
  EXPECT_EQ(MakeServingPlan(ServingDefaults(), 0, cpu_with_gpus, two_gpus).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ServingConfigTest, TritonsModelWarmupSamplesAreKeptInOrderAndCheckedAsFarAsTheyCanBe) {
  auto plan = [](const std::string& text) {
    return MakeServingPlan(ServingDefaults(), /*model_max_batch_size=*/8,
                           ParseServingConfig("max_batch_size: 8 " + text).value());
  };
  auto ok = plan(R"pb(
    model_warmup {
      name: "zeros" batch_size: 8 count: 2
      inputs { key: "input" value { data_type: TYPE_FP32 dims: [ 1, 28, 28 ] zero_data: true } }
    }
    model_warmup {
      name: "noise" batch_size: 1
      inputs { key: "input" value { data_type: TYPE_FP32 dims: [ 1, 28, 28 ] random_data: true } }
    })pb");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->warm_up.size(), 2u);
  EXPECT_EQ(ok->warm_up[0].name(), "zeros");
  EXPECT_EQ(ok->warm_up[0].batch_size(), 8u);
  EXPECT_EQ(ok->warm_up[0].count(), 2u);
  EXPECT_TRUE(ok->warm_up[1].inputs().at("input").random_data());
  EXPECT_TRUE(plan("").value().warm_up.empty());
  const std::string input =
      R"pb(inputs { key: "input" value { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } })pb";
  struct Case {
    std::string text, says;
  };
  for (const Case& c : std::vector<Case>{
           {"model_warmup { name: \"w\" batch_size: 9 " + input + " }",
            "model_warmup 'w': batch_size must be in 1..8"},
           {"model_warmup { name: \"w\" " + input + " }", "batch_size must be in 1..8"},
           {"model_warmup { name: \"w\" batch_size: 1 count: 1001 " + input + " }",
            "count must be at most 1000"},
           {"model_warmup { name: \"w\" batch_size: 1 }", "give the model's one input, not 0"},
           {R"pb(model_warmup { name: "w" batch_size: 1
                   inputs { key: "input" value { data_type: TYPE_FP32 } } })pb",
            "needs zero_data, random_data or input_data_file"}}) {
    auto refused = plan(c.text);
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(refused.status().message().find(c.says), std::string::npos) << refused.status();
  }
}

TEST(ServingConfigTest, AWarmUpFileMustStayBelowTheModelsWarmupDirectory) {
  auto plan = [](const std::string& file) {
    return MakeServingPlan(ServingDefaults(), 8,
                           ParseServingConfig(absl::StrCat(
                               R"pb(model_warmup { name: "w" batch_size: 1
                                      inputs { key: "input" value { data_type: TYPE_FP32
                                        dims: [ 1 ] input_data_file: ")pb",
                               file, R"pb(" } } })pb"))
                               .value());
  };
  for (const std::string good : {"x.bin", "images/one.raw", "a..b"}) {
    auto ok = plan(good);
    ASSERT_TRUE(ok.ok()) << good << ": " << ok.status();
    EXPECT_EQ(ok->warm_up.at(0).inputs().at("input").input_data_file(), good);
  }
  for (const std::string bad : {"", "/etc/passwd", "../x.bin", "a/../../x.bin", "a//b", "./x",
                                 "a/"}) {
    auto refused = plan(bad);
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find(
                  "must name a file below the model's warmup/ directory"),
              std::string::npos)
        << refused.status();
  }
}

TEST(ServingConfigTest, CudaGraphsFollowTheModelOverTheServerAndOnlyOnGpus) {
  DeviceInventory one_gpu{1, ""};
  auto groups = [](std::string extra) {
    return ParseServingConfig(
               "instance_group { kind: KIND_GPU } instance_group { kind: KIND_CPU } " + extra)
        .value();
  };
  auto graphs = [&](const ServingDefaults& defaults, const std::string& extra) {
    const ServingPlan plan = MakeServingPlan(defaults, 0, groups(extra), one_gpu).value();
    std::vector<bool> out;
    for (const InstanceSpec& s : plan.instances) out.push_back(s.cuda_graphs);
    return out;
  };
  ServingDefaults off, on;
  on.cuda_graphs = true;
  // Without a `cuda` block the server's default holds, for the GPU instance only.
  EXPECT_EQ(graphs(off, ""), (std::vector<bool>{false, false}));
  EXPECT_EQ(graphs(on, ""), (std::vector<bool>{true, false}));
  EXPECT_EQ(graphs(on, "optimization { }"), (std::vector<bool>{true, false}));
  // The model's block wins either way, even when it leaves graphs at false.
  EXPECT_EQ(graphs(off, "optimization { cuda { graphs: true } }"),
            (std::vector<bool>{true, false}));
  EXPECT_EQ(graphs(on, "optimization { cuda { graphs: false } }"),
            (std::vector<bool>{false, false}));
  EXPECT_EQ(graphs(on, "optimization { cuda { } }"), (std::vector<bool>{false, false}));
  // Every instance knows the largest batch it is given (the padding bound of graphs).
  auto sized = ParseServingConfig("max_batch_size: 48 instance_group { kind: KIND_GPU }").value();
  EXPECT_EQ(MakeServingPlan(on, 0, sized, one_gpu).value().instances[0].max_batch_size, 48);
  // Triton's other optimization settings are not read, and say so.
  EXPECT_EQ(ParseServingConfig("optimization { cuda { busy_wait_events: true } }").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseServingConfig("optimization { priority: PRIORITY_MAX }").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
