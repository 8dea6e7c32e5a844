// KServe ModelInfer through the tasks: one job per example, outputs gathered into one
// response, the tasks' own outputs and parameters, and the parameters of other tasks.
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "server/api/infer_results.h"
#include "tests/unit/tasks/task_test_util.h"

namespace gatescope {
namespace {

using testing::Outcome;
using testing::TaskFrom;
namespace kv = ::inference;

constexpr char kClassifier[] = R"({"task":"image_classification","input":{"shape":[1,2,2]},
  "labels":["a","b","c"],"outputs":["logits"],"token_grid":[1,1],"cls_token":true,
  "maps":["attention"],"layers":1,"heads":1})";

constexpr char kDetector[] = R"({"task":"object_detection","input":{"shape":[1,8,8],
  "any_size":true,"native_size":true},"labels":["a","b"],"outputs":["logits","boxes"],
  "maps":["sampling_points"],"layers":2,"heads":1,"detection":{"encoder_layers":1,
  "decoder_layers":1,"levels":1,"points":1,"queries":2,"score_threshold":0.5,
  "max_detections":4}})";

// A request of `batch` UINT8 images [1, h, w] of zeros.
kv::ModelInferRequest Pixels(int batch, int h, int w) {
  kv::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("input");
  in->set_datatype("UINT8");
  for (int64_t d : {int64_t{batch}, int64_t{1}, int64_t{h}, int64_t{w}}) in->add_shape(d);
  r.add_raw_input_contents(std::string(static_cast<size_t>(batch * h * w), '\0'));
  return r;
}

// Runs every job with `outputs` as its model outputs.
void RunAll(std::vector<std::unique_ptr<InferenceJob>>& jobs, const NamedTensors& outputs) {
  for (auto& job : jobs) {
    ASSERT_TRUE(job->Prepare().ok());
    job->Finish(outputs);
  }
}

std::vector<float> Floats(const kv::ModelInferResponse& r, int i) {
  std::vector<float> out(r.raw_output_contents(i).size() / 4);
  std::memcpy(out.data(), r.raw_output_contents(i).data(), out.size() * 4);
  return out;
}

TEST(KServeInferTest, OneJobPerExampleAndOneResponse) {
  auto task = TaskFrom(kClassifier);
  kv::ModelInferRequest request = Pixels(2, 2, 2);
  kv::ModelInferResponse response;
  Outcome outcome;
  auto results = std::make_shared<InferResults>(&request, &response, outcome.Done());
  auto jobs = task->Infer(request, results);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  RunAll(*jobs, {{"logits", at::tensor({1.f, 2.f, 3.f})}});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.calls, 1);
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "logits");
  EXPECT_EQ(std::vector<int64_t>(response.outputs(0).shape().begin(),
                                 response.outputs(0).shape().end()),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Floats(response, 0), (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

TEST(KServeInferTest, OneFailedExampleFailsTheCallOnce) {
  auto task = TaskFrom(kClassifier);
  kv::ModelInferRequest request = Pixels(3, 2, 2);
  kv::ModelInferResponse response;
  Outcome outcome;
  auto results = std::make_shared<InferResults>(&request, &response, outcome.Done());
  auto jobs = *task->Infer(request, results);
  jobs[0]->Finish(NamedTensors{{"logits", at::zeros({3})}});
  jobs[1]->Refuse(absl::ResourceExhaustedError("queue full"));
  EXPECT_EQ(outcome.calls, 0);
  jobs[2]->Finish(NamedTensors{{"logits", at::zeros({3})}});
  EXPECT_EQ(outcome.calls, 1);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kResourceExhausted);
}

TEST(KServeInferTest, RequestsAreCheckedBeforeAnyJobExists) {
  auto classifier = TaskFrom(kClassifier);
  auto detector = TaskFrom(kDetector);
  kv::ModelInferResponse response;
  auto check = [&](const Task& task, kv::ModelInferRequest request, absl::StatusCode code) {
    auto results = std::make_shared<InferResults>(&request, &response, nullptr);
    EXPECT_EQ(task.Infer(request, results).status().code(), code) << request.DebugString();
  };
  kv::ModelInferRequest foreign = Pixels(1, 2, 2);
  (*foreign.mutable_parameters())["max_detections"].set_int64_param(3);
  check(*classifier, foreign, absl::StatusCode::kInvalidArgument);
  kv::ModelInferRequest explain = Pixels(1, 8, 8);
  (*explain.mutable_parameters())["explain"].set_string_param("rollout");
  check(*detector, explain, absl::StatusCode::kInvalidArgument);
  kv::ModelInferRequest unknown_output = Pixels(1, 2, 2);
  unknown_output.add_outputs()->set_name("rollout");  // needs the explain parameter
  check(*classifier, unknown_output, absl::StatusCode::kInvalidArgument);
  kv::ModelInferRequest wrong_type = Pixels(1, 8, 8);
  (*wrong_type.mutable_parameters())["max_detections"].set_string_param("3");
  check(*detector, wrong_type, absl::StatusCode::kInvalidArgument);
  check(*classifier, Pixels(1, 3, 3), absl::StatusCode::kInvalidArgument);  // wrong size
  kv::ModelInferRequest cap = Pixels(1, 2, 2);
  (*cap.mutable_parameters())["explain"].set_string_param("rollout");
  auto tiny = TaskFrom(kClassifier, /*explain_max_bytes=*/8);
  check(*tiny, cap, absl::StatusCode::kResourceExhausted);
}

TEST(KServeInferTest, ExplanationsOfAllExamplesShareOneByteBudget) {
  // A rollout of this classifier holds 180 bytes: one example fits a 200-byte cap, three
  // together (the call keeps every example's maps until the last finishes) do not.
  auto task = TaskFrom(kClassifier, /*explain_max_bytes=*/200);
  kv::ModelInferResponse response;
  for (int batch : {1, 3}) {
    kv::ModelInferRequest request = Pixels(batch, 2, 2);
    (*request.mutable_parameters())["explain"].set_string_param("rollout");
    auto results = std::make_shared<InferResults>(&request, &response, nullptr);
    auto jobs = task->Infer(request, results);
    if (batch == 1) {
      EXPECT_TRUE(jobs.ok()) << jobs.status();
    } else {
      EXPECT_EQ(jobs.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_NE(jobs.status().message().find("3 examples"), absl::string_view::npos);
    }
  }
}

TEST(KServeInferTest, ACallKnowsAtOnceThatAnExampleFailed) {
  auto task = TaskFrom(kClassifier);
  kv::ModelInferRequest request = Pixels(2, 2, 2);
  kv::ModelInferResponse response;
  Outcome outcome;
  auto results = std::make_shared<InferResults>(&request, &response, outcome.Done());
  auto jobs = *task->Infer(request, results);
  EXPECT_FALSE(results->failed());
  jobs[1]->Refuse(absl::ResourceExhaustedError("queue full"));
  // Queued examples of the call can now be dropped (the frontend refuses them as
  // cancelled); the call finishes once the last example is accounted for.
  EXPECT_TRUE(results->failed());
  EXPECT_EQ(outcome.calls, 0);
  jobs[0]->Refuse(absl::CancelledError("call failed"));
  EXPECT_EQ(outcome.calls, 1);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kResourceExhausted);
}

TEST(KServeInferTest, DetectorsAddPaddedDetections) {
  auto task = TaskFrom(kDetector);
  kv::ModelInferRequest request = Pixels(1, 8, 8);
  (*request.mutable_parameters())["max_detections"].set_int64_param(3);
  for (const char* name : {"detection_boxes", "detection_scores", "detection_classes",
                           "num_detections"}) {
    request.add_outputs()->set_name(name);
  }
  kv::ModelInferResponse response;
  Outcome outcome;
  auto results = std::make_shared<InferResults>(&request, &response, outcome.Done());
  auto jobs = *task->Infer(request, results);
  // Query 0 scores sigmoid(3) for class 1; everything else is far below 0.5.
  NamedTensors outputs{{"logits", at::tensor({-9.f, 3.f, -9.f, -9.f}).reshape({2, 2})},
                       {"boxes", at::full({2, 4}, 0.5f)}};
  RunAll(jobs, outputs);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  ASSERT_EQ(response.outputs_size(), 4);
  EXPECT_EQ(response.outputs(0).shape(2), 4);
  EXPECT_EQ(response.outputs(0).shape(1), 3);  // K = max_detections
  const std::vector<float> boxes = Floats(response, 0);
  EXPECT_FLOAT_EQ(boxes[0], 2.f);  // (0.5 - 0.25) * 8
  EXPECT_FLOAT_EQ(boxes[2], 6.f);
  EXPECT_FLOAT_EQ(boxes[4], 0.f);  // padding
  int64_t count = 0;
  std::memcpy(&count, response.raw_output_contents(3).data(), 8);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(response.outputs(2).datatype(), "INT64");
}

}  // namespace
}  // namespace gatescope

namespace gatescope {
namespace {

// Non-finite model inputs are refused (the documented policy), not answered with NaN.
TEST(KServeInferTest, NonFiniteFp32InputsAreRefused) {
  auto task = TaskFrom(kClassifier);
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    kv::ModelInferRequest request;
    auto* in = request.add_inputs();
    in->set_name("input");
    in->set_datatype("FP32");
    for (int64_t d : {1, 1, 2, 2}) in->add_shape(d);
    const float values[4] = {0.f, 0.5f, bad, 1.f};
    request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), 16));
    kv::ModelInferResponse response;
    Outcome outcome;
    auto results = std::make_shared<InferResults>(&request, &response, outcome.Done());
    auto jobs = task->Infer(request, results);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    auto example = (*jobs)[0]->Prepare();
    ASSERT_FALSE(example.ok());
    EXPECT_EQ(example.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(example.status().message().find("non-finite"), std::string::npos);
  }
}

// Encoded images are decoded before queuing; pixel tensors need no preparation thread.
TEST(KServeInferTest, OnlyEncodedImagesArePreparedAhead) {
  auto task = TaskFrom(kClassifier);
  kv::ModelInferRequest pixels = Pixels(1, 2, 2);
  kv::ModelInferRequest images;
  auto* in = images.add_inputs();
  in->set_name("input");
  in->set_datatype("BYTES");
  in->add_shape(1);
  in->mutable_contents()->add_bytes_contents("\x89PNG\r\n\x1a\n not really");
  kv::ModelInferResponse response;
  for (auto* request : {&pixels, &images}) {
    auto results = std::make_shared<InferResults>(request, &response, nullptr);
    auto jobs = task->Infer(*request, results);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    EXPECT_EQ((*jobs)[0]->prepares_ahead(), request == &images);
  }
  auto detector = TaskFrom(kDetector);  // native_size: decoded on the worker
  kv::ModelInferRequest native = images;
  auto results = std::make_shared<InferResults>(&native, &response, nullptr);
  auto jobs = detector->Infer(native, results);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_FALSE((*jobs)[0]->prepares_ahead());
}

// Small images are decoded on the thread that receives them (a hop to a preparation thread
// costs more), larger ones on a preparation thread; small by the header's size and the bytes.
TEST(KServeInferTest, SmallImagesAreDecodedOnTheReceivingThread) {
  auto task = TaskFrom(kClassifier);
  for (int side : {28, 128, 129, 512}) {
    std::vector<uchar> png;
    ASSERT_TRUE(cv::imencode(".png", cv::Mat(side, side, CV_8UC1, cv::Scalar(7)), png));
    kv::ModelInferRequest request;
    auto* in = request.add_inputs();
    in->set_name("input");
    in->set_datatype("BYTES");
    in->add_shape(1);
    in->mutable_contents()->add_bytes_contents(std::string(png.begin(), png.end()));
    kv::ModelInferResponse response;
    auto results = std::make_shared<InferResults>(&request, &response, nullptr);
    auto jobs = task->Infer(request, results);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    EXPECT_TRUE((*jobs)[0]->prepares_ahead()) << side;
    EXPECT_EQ((*jobs)[0]->prepares_on_caller(), side <= 128) << side;
  }
  // Few pixels but many bytes (PNG text chunks; the header alone does not bound the work):
  // decoded on a preparation thread.
  std::vector<uchar> png;
  ASSERT_TRUE(cv::imencode(".png", cv::Mat(28, 28, CV_8UC1, cv::Scalar(7)), png));
  std::string bytes(png.begin(), png.end());
  std::string chunk(4, '\0');
  const uint32_t length = 70000;
  for (int i = 0; i < 4; ++i) chunk[i] = static_cast<char>((length >> (24 - 8 * i)) & 0xff);
  chunk += "tEXt" + std::string(length, 'x') + std::string(4, '\0');  // CRC unchecked here
  bytes.insert(33, chunk);  // after the signature (8) and IHDR (25)
  kv::ModelInferRequest request;
  auto* in = request.add_inputs();
  in->set_name("input");
  in->set_datatype("BYTES");
  in->add_shape(1);
  in->mutable_contents()->add_bytes_contents(bytes);
  kv::ModelInferResponse response;
  auto results = std::make_shared<InferResults>(&request, &response, nullptr);
  auto jobs = task->Infer(request, results);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE((*jobs)[0]->prepares_ahead());
  EXPECT_FALSE((*jobs)[0]->prepares_on_caller());
}

// A batch of one is its example viewed with a batch dim (no copy); larger batches of
// equal shapes are stacked copies, and a different shape makes a batch of its own.
TEST(ImageGatherTest, OneExampleIsViewedOthersStacked) {
  auto task = TaskFrom(kClassifier);
  const at::Tensor a = at::rand({1, 2, 2}), b = at::rand({1, 2, 2}), c = at::rand({1, 3, 3});
  auto one = task->Gather({a}, CallShapes{});
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  const at::Tensor& alone = one->front().inputs.at(0);
  EXPECT_EQ(alone.sizes(), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(alone.data_ptr(), a.data_ptr());
  auto mixed = task->Gather({a, c, b}, CallShapes{});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->size(), 2u);
  EXPECT_EQ((*mixed)[0].members, (std::vector<size_t>{0, 2}));
  EXPECT_TRUE(at::equal((*mixed)[0].inputs.at(0), at::stack({a, b})));
  EXPECT_NE((*mixed)[0].inputs.at(0).data_ptr(), a.data_ptr());
  EXPECT_EQ((*mixed)[1].members, (std::vector<size_t>{1}));
  EXPECT_TRUE(at::equal((*mixed)[1].inputs.at(0), c.unsqueeze(0)));
}

}  // namespace
}  // namespace gatescope
