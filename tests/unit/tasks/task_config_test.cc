// A model's metadata as the server reads it: parsed (config/model_config.h), then checked
// and completed by the task it names (tasks/task_registry.h).
#include <gtest/gtest.h>

#include <string>

#include "server/config/model_config.h"
#include "server/tasks/task_registry.h"

namespace gatescope {
namespace {

// The metadata as a loaded model serves it, or why it cannot be served.
absl::StatusOr<ModelConfig> ParseModelConfigAndTask(std::string_view json) {
  auto parsed = ParseModelConfig(json);
  if (!parsed.ok()) return parsed.status();
  auto task = CreateTask(*parsed, TaskOptions());
  if (!task.ok()) return task.status();
  return (*task)->config();
}

bool IsSegmentation(const ModelConfig& c) { return c.task() == "image_segmentation"; }
bool IsDetection(const ModelConfig& c) { return c.task() == "object_detection"; }

const char kValid[] = R"({
  "name": "dgvit", "task": "image_classification", "arch": "dgvit",
  "input": {"shape": [1, 28, 28], "color": "gray", "mean": [0.286], "std": [0.353]},
  "labels": ["a", "b", "c"], "outputs": ["logits"], "token_grid": [4, 4], "cls_token": true,
  "maps": ["attention", "gate"], "required_ops": ["gatescope"], "max_batch_size": 32})";

TEST(ModelConfigTest, ParsesAndFillsDefaults) {
  auto config = ParseModelConfigAndTask(kValid);
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
  auto config = ParseModelConfigAndTask(
      R"({"task":"image_classification","input":{"shape":[3,8,8]},"labels":["x"],"outputs":["logits"]})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->input().color(), "rgb");
  EXPECT_EQ(config->input().mean_size(), 3);
  EXPECT_FLOAT_EQ(config->input().std(2), 1.f);
}

// The shape of gatescope.json a converted PVT-GDLA checkpoint carries.
const char kSegmentation[] = R"({
  "name": "seg", "task": "image_segmentation", "arch": "pvt_gdla",
  "input": {"shape": [1, 224, 192], "color": "gray", "normalization": "minmax",
            "any_size": true},
  "labels": ["bg", "a", "b", "c", "d"], "outputs": ["logits"], "maps": ["attention", "gate"],
  "required_ops": ["gatescope"], "max_batch_size": 16, "layers": 3, "heads": 1})";

TEST(ModelConfigTest, ParsesSegmentationModels) {
  auto config = ParseModelConfigAndTask(kSegmentation);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(IsSegmentation(*config));
  EXPECT_TRUE(UsesMinMax(config->input()));
  EXPECT_TRUE(config->input().any_size());
  EXPECT_EQ(config->layers(), 3);
  EXPECT_EQ(config->labels_size(), 5);
  EXPECT_FALSE(IsSegmentation(*ParseModelConfigAndTask(kValid)));
  EXPECT_FALSE(UsesMinMax(ParseModelConfigAndTask(kValid)->input()));
}

// The shape of gatescope.json models/export_detector.py writes.
const char kDetection[] = R"({
  "name": "det", "task": "object_detection", "arch": "plug_deformable_detr",
  "input": {"shape": [1, 128, 128], "color": "gray", "scale": 0.00392156862745098,
            "mean": [0.5], "std": [0.5], "any_size": true, "native_size": true,
            "min_side": 32, "max_pixels": 1048576},
  "labels": ["a", "b", "c"], "outputs": ["logits", "boxes"],
  "maps": ["sampling_points", "plug_gate"], "required_ops": ["gatescope"],
  "max_batch_size": 16, "layers": 4, "heads": 8,
  "detection": {"encoder_layers": 2, "decoder_layers": 2, "levels": 4, "points": 4,
                "queries": 50, "score_threshold": 0.3, "max_detections": 100,
                "level_strides": [8, 16, 32, 64]}})";

TEST(ModelConfigTest, ParsesDetectionModels) {
  auto config = ParseModelConfigAndTask(kDetection);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(IsDetection(*config));
  EXPECT_FALSE(IsSegmentation(*config));
  EXPECT_TRUE(config->input().native_size());
  EXPECT_EQ(config->input().min_side(), 32);
  EXPECT_EQ(config->input().max_pixels(), 1048576);
  EXPECT_EQ(config->detection().queries(), 50);
  EXPECT_FLOAT_EQ(config->detection().score_threshold(), 0.3f);
  EXPECT_FALSE(IsDetection(*ParseModelConfigAndTask(kValid)));
}

// kDetection with `from` replaced by `to`, which must break it with `message`.
void ExpectDetectionRejected(const std::string& from, const std::string& to,
                             const std::string& message) {
  std::string json = kDetection;
  const size_t at = json.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  json.replace(at, from.size(), to);
  auto config = ParseModelConfigAndTask(json);
  ASSERT_FALSE(config.ok()) << to;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(config.status().message()).find(message), std::string::npos)
      << config.status();
}

TEST(ModelConfigTest, RejectsIncompleteDetectionModels) {
  ExpectDetectionRejected(R"("outputs": ["logits", "boxes"])", R"("outputs": ["logits"])",
                          "'boxes'");
  ExpectDetectionRejected(R"("native_size": true,)", "", "native_size");
  ExpectDetectionRejected(R"("any_size": true,)", "", "need input.any_size");
  ExpectDetectionRejected(R"("queries": 50)", R"("queries": 0)", "queries");
  ExpectDetectionRejected(R"("score_threshold": 0.3)", R"("score_threshold": 1.0)",
                          "score_threshold");
  ExpectDetectionRejected(R"("layers": 4)", R"("layers": 3)", "encoder_layers + decoder_layers");
  ExpectDetectionRejected(R"("plug_gate"])", R"("gate"])", "'sampling_points' and 'plug_gate'");
  ExpectDetectionRejected(R"("max_pixels": 1048576)", R"("max_pixels": 100)", "admit");
  ExpectDetectionRejected(
      R"(,
  "detection": {"encoder_layers": 2, "decoder_layers": 2, "levels": 4, "points": 4,
                "queries": 50, "score_threshold": 0.3, "max_detections": 100,
                "level_strides": [8, 16, 32, 64]})",
      "", "needs detection");
  ExpectDetectionRejected(R"("level_strides": [8, 16, 32, 64])", R"("level_strides": [8, 16])",
                          "level_strides");
}

TEST(ModelConfigTest, NormalizationValuesAndAnySizeForClassifiers) {
  for (const char* norm : {"", "mean_std", "minmax"}) {
    const std::string json = std::string(
        R"({"task":"image_classification","input":{"shape":[1,8,8],"normalization":")") +
        norm + R"(","any_size":true},"labels":["x"],"outputs":["logits"]})";
    auto config = ParseModelConfigAndTask(json);
    EXPECT_TRUE(config.ok()) << norm << ": " << config.status();
  }
}

TEST(ModelConfigTest, SegmentationAllows256LabelsNotMore) {
  auto with_labels = [](int n) {
    std::string labels;
    for (int i = 0; i < n; ++i) labels += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
    return std::string(R"({"task":"image_segmentation","input":{"shape":[3,32,32]},"labels":[)") +
           labels + R"(],"outputs":["logits"]})";
  };
  EXPECT_TRUE(ParseModelConfigAndTask(with_labels(256)).ok());
  auto over = ParseModelConfigAndTask(with_labels(257));
  ASSERT_FALSE(over.ok());
  EXPECT_NE(std::string(over.status().message()).find("2..256 labels"), std::string::npos);
}

struct BadCase {
  const char* json;
  const char* expect_in_message;
};

class ModelConfigRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(ModelConfigRejects, WithInvalidArgument) {
  auto config = ParseModelConfigAndTask(GetParam().json);
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
        BadCase{R"({"task":"detection","labels":["a"],"outputs":["logits"]})", "unsupported task"},
        BadCase{R"({"labels":["a"],"outputs":["logits"]})", "task must be set"},
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
                "token_grid"},
        BadCase{R"({"task":"image_classification","input":{"shape":[1,28,28],"normalization":"zscore"},"labels":["a"],"outputs":["logits"]})",
                "input.normalization"},
        BadCase{R"({"task":"image_segmentation","input":{"shape":[1,32,32]},"labels":["a"],"outputs":["logits"]})",
                "2..256 labels"},
        BadCase{R"({"task":"image_segmentation","input":{"shape":[1,32,32]},"labels":["a","b"],"outputs":["mask"]})",
                "logits"},
        BadCase{R"({"task":"image_segmentation","input":{"shape":[1,32,32]},"labels":["a","b"],"outputs":["logits"],"maps":["resonance"]})",
                "'attention' and 'gate'"},
        BadCase{R"({"task":"image_segmentation","input":{"shape":[1,32,32]},"labels":["a","b"],"outputs":["logits"],"layers":-1})",
                "layers and heads"}));

}  // namespace
}  // namespace gatescope
