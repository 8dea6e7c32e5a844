#include "client/task_output.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "tests/unit/client/float_tensor.h"

namespace gatescope::client {
namespace {

TEST(ClientTaskOutputTest, EveryServedTaskHasAnOutput) {
  for (const char* task : {"image_classification", "image_segmentation", "object_detection",
                           "text_classification"}) {
    absl::StatusOr<std::unique_ptr<TaskOutput>> out = NewTaskOutput(task, {});
    ASSERT_TRUE(out.ok()) << task << ": " << out.status();
    EXPECT_NE(*out, nullptr);
  }
}

TEST(ClientTaskOutputTest, AnUnknownTaskIsAClearError) {
  absl::StatusOr<std::unique_ptr<TaskOutput>> out = NewTaskOutput("pose_estimation", {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(out.status().message());
  EXPECT_NE(message.find("'pose_estimation'"), std::string::npos);
  EXPECT_NE(message.find("image_classification"), std::string::npos);
  EXPECT_FALSE(NewTaskOutput("", {}).ok());
}

TEST(ClientTaskOutputTest, ClassificationPredictListsTheRankedClasses) {
  auto out = std::move(NewTaskOutput("image_classification", {})).value();
  v1::PredictResponse response;
  auto* c = response.add_classes();
  c->set_label("Shirt");
  c->set_probability(0.75f);
  c = response.add_classes();
  c->set_label("Coat");
  c->set_probability(0.25f);
  EXPECT_EQ(out->Predict(InputImage{"a.png", "", cv::Mat()}, response).value(),
            ",\"label\":\"Shirt\",\"score\":0.75,\"topk\":[{\"label\":\"Shirt\",\"score\":0.75},"
            "{\"label\":\"Coat\",\"score\":0.25}]");
}

TEST(ClientTaskOutputTest, SegmentationPredictCountsPixelsByLabel) {
  OutputSettings settings;
  settings.labels = {"background", "grey matter"};
  auto out = std::move(NewTaskOutput("image_segmentation", settings)).value();
  v1::PredictResponse response;
  v1::Segmentation* seg = response.mutable_segmentation();
  seg->mutable_mask()->set_dtype(v1::Tensor::UINT8);
  seg->mutable_mask()->add_shape(2);
  seg->mutable_mask()->add_shape(3);
  seg->mutable_mask()->set_data(std::string("\0\0\1\1\1\2", 6));
  seg->add_class_pixels(2);
  seg->add_class_pixels(3);
  seg->add_class_pixels(1);
  EXPECT_EQ(out->Predict(InputImage{"a.png", "", cv::Mat()}, response).value(),
            ",\"height\":2,\"width\":3,\"class_pixels\":{\"background\":2,\"grey matter\":3,"
            "\"2\":1}");
}

TEST(ClientTaskOutputTest, DetectionPredictListsBoxesAndNeedsAnImageForPictures) {
  auto out = std::move(NewTaskOutput("object_detection", {})).value();
  v1::PredictResponse response;
  v1::Detection* d = response.add_detections();
  d->set_label("7");
  d->set_label_index(7);
  d->set_score(0.5f);
  d->set_x2(10);
  d->set_y2(20);
  d->set_query(3);
  EXPECT_EQ(out->Predict(InputImage{"a.png", "", cv::Mat()}, response).value(),
            ",\"detections\":[{\"label\":\"7\",\"label_index\":7,\"score\":0.5,"
            "\"box\":[0,0,10,20],\"query\":3}]");

  OutputSettings settings;
  settings.out_dir = testing::TempDir();
  auto with_files = std::move(NewTaskOutput("object_detection", settings)).value();
  EXPECT_FALSE(with_files->Predict(InputImage{"raw.u8", "", cv::Mat()}, response).ok());  // raw input: no picture
}

TEST(ClientTaskOutputTest, ClassificationExplainWritesPanelMapsAndJson) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "client_task_output_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  OutputSettings settings;
  settings.out_dir = dir.string();
  auto out = std::move(NewTaskOutput("image_classification", settings)).value();
  InputImage input{"/in/x.png", "", cv::Mat(28, 28, CV_8UC3, cv::Scalar(90, 90, 90))};
  v1::ExplainResponse response;
  *response.mutable_rollout() = FloatTensor({2, 2}, {0.1f, 0.2f, 0.3f, 0.4f});
  *response.add_gates() = FloatTensor({1, 2, 2}, {1, 0, 0, 1});
  response.add_classes()->set_label("Bag");
  const std::string stem = (dir / "x.png").string();
  EXPECT_EQ(out->Explain(input, {}, response).value(),
            ",\"json\":\"" + stem + ".json\",\"panel\":\"" + stem + ".panel.png\",\"npy\":[\"" +
                stem + ".rollout.npy\",\"" + stem + ".gates.npy\"],\"label\":\"Bag\"");
  EXPECT_TRUE(std::filesystem::exists(stem + ".panel.png"));
  EXPECT_EQ(std::filesystem::file_size(stem + ".gates.npy"), 128u + 16u);  // header + 4 floats

  *response.add_gates() = FloatTensor({1, 3, 3}, std::vector<float>(9, 0.f));  // ragged layers
  const absl::StatusOr<std::string> bad = out->Explain(input, {}, response);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("gate maps differ"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gatescope::client
