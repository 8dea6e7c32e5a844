// gatescope.v1 requests through the tasks: each task refuses the fields other tasks take
// and ignores the rest, explanations of native-size inputs are bounded for the input's
// own size before the pass, and jobs of equal sizes share a batching key.
#include <gtest/gtest.h>

#include "tests/unit/tasks/task_test_util.h"

namespace gatescope {
namespace {

using testing::SetGrayPixels;
using testing::TaskFrom;

constexpr char kClassifier[] = R"({"task":"image_classification","input":{"shape":[1,2,2]},
  "labels":["a","b","c"],"outputs":["logits"],"token_grid":[1,1],"cls_token":true,
  "maps":["attention","gate"],"layers":1,"heads":1})";

// A PLuG detector over an 8 x 8 canvas with one level of stride 8.
constexpr char kDetector[] = R"({"task":"object_detection","input":{"shape":[1,8,8],
  "any_size":true,"native_size":true},"labels":["a","b"],"outputs":["logits","boxes"],
  "maps":["sampling_points","plug_gate"],"layers":2,"heads":1,"detection":{
  "encoder_layers":1,"decoder_layers":1,"levels":1,"points":1,"queries":2,
  "score_threshold":0.5,"max_detections":4,"level_strides":[8]}})";

absl::StatusCode PredictCode(const Task& task, const v1::PredictRequest& request) {
  v1::PredictResponse response;
  return task.Predict(request, &response, nullptr).status().code();
}

absl::StatusCode ExplainCode(const Task& task, const v1::ExplainRequest& request) {
  v1::ExplainResponse response;
  return task.Explain(request, &response, nullptr).status().code();
}

TEST(V1RequestsTest, EachTaskRefusesTheFieldsOfTheOthersAndIgnoresTheRest) {
  auto classifier = TaskFrom(kClassifier);
  auto detector = TaskFrom(kDetector);
  v1::PredictRequest predict;
  SetGrayPixels(predict.mutable_tensor(), 2, 2);
  predict.set_mask_png(true);  // a segmentation field no task refuses: ignored
  EXPECT_EQ(PredictCode(*classifier, predict), absl::StatusCode::kOk);
  predict.set_max_detections(3);
  EXPECT_EQ(PredictCode(*classifier, predict), absl::StatusCode::kInvalidArgument);

  v1::ExplainRequest explain;
  SetGrayPixels(explain.mutable_tensor(), 2, 2);
  explain.mutable_rollout_options();  // present but all defaults: not a request for rollout
  explain.set_gates(true);
  EXPECT_EQ(ExplainCode(*classifier, explain), absl::StatusCode::kOk);
  EXPECT_EQ(ExplainCode(*detector, explain), absl::StatusCode::kInvalidArgument);  // gates
  explain.set_gates(false);
  explain.mutable_query_pixel()->set_y(1);
  EXPECT_EQ(ExplainCode(*classifier, explain), absl::StatusCode::kInvalidArgument);
  explain.clear_query_pixel();
  explain.set_plug_gates(true);  // PLuG classifiers and PLuG detectors both take it
  EXPECT_EQ(ExplainCode(*detector, explain), absl::StatusCode::kOk);
  explain.mutable_rollout_options()->set_head_fusion("max");
  EXPECT_EQ(ExplainCode(*detector, explain), absl::StatusCode::kInvalidArgument);
}

TEST(V1RequestsTest, ANativeSizeExplanationIsBoundedForTheInputsOwnSizeBeforeThePass) {
  // 8 x 8 (the canvas): 33 floats; 512 x 512: the encoder's gate map alone has 64 x 64
  // cells, 8216 floats in all. A 1000-byte cap admits the first only.
  auto detector = TaskFrom(kDetector, /*explain_max_bytes=*/1000);
  for (int side : {8, 512}) {
    v1::ExplainRequest request;
    SetGrayPixels(request.mutable_tensor(), side, side);
    request.set_plug_gates(true);
    v1::ExplainResponse response;
    auto job = detector->Explain(request, &response, nullptr);
    ASSERT_TRUE(job.ok()) << job.status();  // the canvas size fits: queued
    ASSERT_TRUE((*job)->Prepare().ok());
    const auto pass = (*job)->BeginExplain();
    if (side == 8) {
      EXPECT_TRUE(pass.ok()) << pass.status();
    } else {
      EXPECT_EQ(pass.status().code(), absl::StatusCode::kResourceExhausted);
    }
  }
}

TEST(V1RequestsTest, NativeSizeInputsOfOneSizeShareABatchingKey) {
  auto classifier = TaskFrom(kClassifier);
  auto detector = TaskFrom(kDetector);
  auto key = [](const Task& task, int h, int w) {
    v1::PredictRequest request;
    SetGrayPixels(request.mutable_tensor(), h, w);
    v1::PredictResponse response;
    return task.Predict(request, &response, nullptr).value()->shape_key();
  };
  EXPECT_EQ(key(*classifier, 2, 2), 0u);  // resized to the model's size: all share
  EXPECT_EQ(key(*detector, 64, 96), key(*detector, 64, 96));
  EXPECT_NE(key(*detector, 64, 96), key(*detector, 96, 64));
  EXPECT_NE(key(*detector, 64, 96), 0u);
}

}  // namespace
}  // namespace gatescope
