#include "server/config/model_config.h"

#include <gtest/gtest.h>

#include <string>

namespace gatescope {
namespace {

const char kValid[] = R"({
  "name": "dgvit", "task": "image_classification", "arch": "dgvit",
  "input": {"shape": [1, 28, 28], "color": "gray", "mean": [0.286], "std": [0.353]},
  "labels": ["a", "b", "c"], "outputs": ["logits"], "token_grid": [4, 4], "cls_token": true,
  "maps": ["attention", "gate"], "required_ops": ["gatescope"], "max_batch_size": 32})";

TEST(ModelConfigTest, ParsesAndFillsDefaults) {
  auto config = ParseModelConfig(kValid);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->name(), "dgvit");
  EXPECT_EQ(config->labels_size(), 3);
  EXPECT_EQ(config->input().shape(2), 28);
  EXPECT_FLOAT_EQ(config->input().scale(), 1.f / 255.f);
  EXPECT_FLOAT_EQ(config->input().std(0), 0.353f);
  EXPECT_EQ(config->max_batch_size(), 32);
  EXPECT_EQ(config->maps(1), "gate");
}

TEST(ModelConfigTest, MissingMeanAndColorGetDefaults) {
  auto config = ParseModelConfig(
      R"({"task":"image_classification","input":{"shape":[3,8,8]},"labels":["x"],"outputs":["logits"]})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->input().color(), "rgb");
  EXPECT_EQ(config->input().mean_size(), 3);
  EXPECT_FLOAT_EQ(config->input().std(2), 1.f);
}

struct BadCase {
  const char* json;
  const char* expect_in_message;
};

class ModelConfigRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(ModelConfigRejects, WithInvalidArgument) {
  auto config = ParseModelConfig(GetParam().json);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(config.status().message()).find(GetParam().expect_in_message),
            std::string::npos)
      << config.status();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ModelConfigRejects,
    ::testing::Values(
        BadCase{"not json", "bad JSON"},
        BadCase{R"({"task":"image_classification","bogus":1})", "bad JSON"},
        BadCase{R"({"task":"detection"})", "unsupported task"},
        BadCase{R"({"task":"image_classification","input":{"shape":[28,28]},"labels":["a"],"outputs":["logits"]})",
                "[C, H, W]"},
        BadCase{R"({"task":"image_classification","input":{"shape":[1,28,28],"color":"rgb"},"labels":["a"],"outputs":["logits"]})",
                "input.color"},
        BadCase{R"({"task":"image_classification","input":{"shape":[1,28,28],"std":[0]},"labels":["a"],"outputs":["logits"]})",
                "std"},
        BadCase{R"({"task":"image_classification","input":{"shape":[1,28,28],"mean":[1,2]},"labels":["a"],"outputs":["logits"]})",
                "one value per channel"},
        BadCase{R"({"task":"image_classification","input":{"shape":[1,28,28]},"labels":[],"outputs":["logits"]})",
                "labels"},
        BadCase{R"({"task":"image_classification","input":{"shape":[1,28,28]},"labels":["a"],"outputs":["x"]})",
                "logits"},
        BadCase{R"({"task":"image_classification","input":{"shape":[1,28,28]},"labels":["a"],"outputs":["logits"],"token_grid":[-2,-2]})",
                "token_grid"}));

}  // namespace
}  // namespace gatescope
