// The segmentation task through its interface: checks, the class map at the input's
// size, the query point of an explanation, and its KServe signature.
#include "server/tasks/task.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include "server/api/infer_results.h"
#include "tests/unit/tasks/task_test_util.h"

namespace gatescope {
namespace {

using testing::Outcome;
using testing::SetGrayPixels;
using testing::TaskFrom;

constexpr char kSeg[] = R"({"task":"image_segmentation","input":{"shape":[1,2,2],
  "normalization":"minmax","any_size":true},"labels":["bg","fg"],"outputs":["logits"],
  "maps":["attention","gate"],"layers":3,"heads":1})";

// Two classes on 2x2; class 1 wins in the right column.
NamedTensors Logits() {
  return {{"logits", at::tensor({1.f, 0.f, 1.f, 0.f, 0.f, 2.f, 0.f, 2.f}).reshape({2, 2, 2})}};
}

TEST(SegmentationTaskTest, ClassMapAtTheInputsSizeWithOptionalParts) {
  auto task = TaskFrom(kSeg);
  v1::PredictRequest request;
  SetGrayPixels(request.mutable_tensor(), 4, 6);
  request.set_mask_png(true);
  request.set_class_probabilities(true);
  v1::PredictResponse response;
  Outcome outcome;
  auto job = task->Predict(request, &response, outcome.Done());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE((*job)->explains());
  auto example = (*job)->Prepare();
  ASSERT_TRUE(example.ok()) << example.status();
  EXPECT_EQ(example->sizes(), (std::vector<int64_t>{1, 2, 2}));  // resized to the model
  (*job)->Finish(Logits());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.calls, 1);
  const v1::Segmentation& seg = response.segmentation();
  EXPECT_EQ(std::vector<int64_t>(seg.mask().shape().begin(), seg.mask().shape().end()),
            (std::vector<int64_t>{4, 6}));
  ASSERT_EQ(seg.mask().data().size(), 24u);
  EXPECT_EQ(seg.class_pixels(0) + seg.class_pixels(1), 24);
  EXPECT_EQ(seg.mask().data()[0], 0);
  EXPECT_EQ(seg.mask().data()[5], 1);
  EXPECT_FALSE(seg.mask_png().empty());
  EXPECT_EQ(seg.probabilities().data().size(), 2u * 24 * 4);
}

TEST(SegmentationTaskTest, MalformedOutputsAreInternalAndTheCallStillFinishes) {
  auto task = TaskFrom(kSeg);
  v1::PredictRequest request;
  SetGrayPixels(request.mutable_tensor(), 2, 2);
  v1::PredictResponse response;
  Outcome outcome;
  auto job = *task->Predict(request, &response, outcome.Done());
  ASSERT_TRUE(job->Prepare().ok());
  job->Finish(NamedTensors{});
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(outcome.calls, 1);
}

TEST(SegmentationTaskTest, QueryPixelBecomesTheQueryPointOnceTheSizeIsKnown) {
  auto task = TaskFrom(kSeg);
  v1::ExplainRequest request;
  SetGrayPixels(request.mutable_tensor(), 300, 250);
  request.mutable_query_pixel()->set_y(120);
  request.mutable_query_pixel()->set_x(40);
  request.set_gates(true);
  v1::ExplainResponse response;
  Outcome outcome;
  auto job = task->Explain(request, &response, outcome.Done());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE((*job)->explains());
  ASSERT_TRUE((*job)->Prepare().ok());
  auto pass = (*job)->BeginExplain();
  ASSERT_TRUE(pass.ok()) << pass.status();
  EXPECT_EQ(pass->layers, 3);
  EXPECT_EQ(pass->args, (std::vector<double>{120.5 / 300, 40.5 / 250}));

  request.mutable_query_pixel()->set_y(300);  // outside the 300 x 250 input
  auto outside = *task->Explain(request, &response, outcome.Done());
  ASSERT_TRUE(outside->Prepare().ok());
  EXPECT_EQ(outside->BeginExplain().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SegmentationTaskTest, OtherTasksOptionsAreRefused) {
  auto task = TaskFrom(kSeg);
  v1::ExplainResponse response;
  for (auto set : std::vector<std::function<void(v1::ExplainRequest&)>>{
           [](v1::ExplainRequest& r) { r.set_rollout(true); },
           [](v1::ExplainRequest& r) { r.set_plug_gates(true); },
           [](v1::ExplainRequest& r) { r.add_attention_layers(0); },
           [](v1::ExplainRequest& r) { r.set_max_detections(3); },
           [](v1::ExplainRequest& r) { r.mutable_query_pixel()->set_y(-1); }}) {
    v1::ExplainRequest request;
    SetGrayPixels(request.mutable_tensor(), 8, 8);
    set(request);
    EXPECT_EQ(task->Explain(request, &response, nullptr).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  v1::PredictRequest predict;  // no input at all
  v1::PredictResponse out;
  EXPECT_EQ(task->Predict(predict, &out, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SegmentationTaskTest, DeclaresLogitsAndAMaskOfAnySize) {
  auto task = TaskFrom(kSeg);
  const KServeSignature s = task->Signature();
  EXPECT_EQ(s.input.shape, (std::vector<int64_t>{1, -1, -1}));
  ASSERT_EQ(s.outputs.size(), 2u);
  EXPECT_EQ(s.outputs[0].shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(s.outputs[1].name, "mask");
  EXPECT_EQ(s.outputs[1].datatype, "UINT8");
  EXPECT_EQ(s.outputs[1].shape, (std::vector<int64_t>{-1, -1}));
}

}  // namespace
}  // namespace gatescope

namespace gatescope {
namespace {

std::unique_ptr<Task> CappedTask(int64_t response_max_bytes) {
  TaskOptions options;
  options.response_max_bytes = response_max_bytes;
  return CreateTask(ParseModelConfig(kSeg).value(), options).value();
}

// A small image may ask for a large class map (the mask has the image's own size): the
// response cap refuses it before the map is allocated.
TEST(SegmentationTaskTest, ResponsesOverTheCapAreRefusedBeforeAllocation) {
  auto task = CappedTask(int64_t{1} << 20);
  for (int side : {128, 1024}) {  // 128^2 x 17 bytes = 278 KB fits; 1024^2 x 17 = 17.8 MB not
    v1::PredictRequest request;
    SetGrayPixels(request.mutable_tensor(), side, side);
    v1::PredictResponse response;
    Outcome outcome;
    auto job = *task->Predict(request, &response, outcome.Done());
    ASSERT_TRUE(job->Prepare().ok());
    job->Finish(Logits());
    EXPECT_EQ(outcome.status.code(), side == 128 ? absl::StatusCode::kOk
                                                 : absl::StatusCode::kResourceExhausted)
        << side << ": " << outcome.status;
  }
}

// The examples of one KServe call share the cap: one 128x128 example fits, four do not.
TEST(SegmentationTaskTest, KServeExamplesShareTheResponseCap) {
  auto task = CappedTask(int64_t{1} << 20);
  for (int batch : {1, 4}) {
    ::inference::ModelInferRequest request;
    auto* in = request.add_inputs();
    in->set_name("input");
    in->set_datatype("UINT8");
    for (int64_t d : {int64_t{batch}, int64_t{1}, int64_t{128}, int64_t{128}}) in->add_shape(d);
    request.add_raw_input_contents(std::string(static_cast<size_t>(batch) * 128 * 128, '\0'));
    ::inference::ModelInferResponse response;
    Outcome outcome;
    auto results = std::make_shared<InferResults>(&request, &response, outcome.Done());
    auto jobs = task->Infer(request, results);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    for (auto& job : *jobs) {
      ASSERT_TRUE(job->Prepare().ok());
      job->Finish(Logits());
    }
    EXPECT_EQ(outcome.status.code(), batch == 1 ? absl::StatusCode::kOk
                                                : absl::StatusCode::kResourceExhausted)
        << batch << ": " << outcome.status;
  }
}

}  // namespace
}  // namespace gatescope
