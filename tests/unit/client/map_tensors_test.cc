#include "client/map_tensors.h"

#include <gtest/gtest.h>

#include "tests/unit/client/float_tensor.h"

namespace gatescope::client {
namespace {

TEST(ClientMapTensorsTest, CheckMapWantsTheRankAndExactBytes) {
  EXPECT_TRUE(CheckMap(FloatTensor({2, 2}, {1, 2, 3, 4}), 2, "rollout").ok());
  EXPECT_FALSE(CheckMap(FloatTensor({2, 2}, {1, 2, 3, 4}), 3, "rollout").ok());
  EXPECT_FALSE(CheckMap(FloatTensor({2, 3}, {1, 2, 3, 4}), 2, "rollout").ok());
  v1::Tensor u8 = FloatTensor({1}, {1});
  u8.set_dtype(v1::Tensor::UINT8);
  const absl::Status st = CheckMap(u8, 1, "gate");
  EXPECT_EQ(std::string(st.message()), "malformed gate map in the response");
}

TEST(ClientMapTensorsTest, StackLayersPrependsTheLayerCount) {
  TensorList layers;
  *layers.Add() = FloatTensor({1, 2}, {1, 2});
  *layers.Add() = FloatTensor({1, 2}, {3, 4});
  absl::StatusOr<StackedMaps> s = StackLayers(layers, "gate", 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->shape, (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(s->bytes.size(), 16u);
  *layers.Add() = FloatTensor({2, 1}, {5, 6});
  EXPECT_FALSE(StackLayers(layers, "gate", 2).ok());
  EXPECT_TRUE(StackLayers(TensorList(), "gate").value().shape.empty());
}

TEST(ClientMapTensorsTest, TensorJsonNestsByShape) {
  EXPECT_EQ(TensorJson(FloatTensor({2, 2}, {1, 2, 3, 0.5f})), "[[1,2],[3,0.5]]");
  TensorList two;
  *two.Add() = FloatTensor({1}, {1});
  *two.Add() = FloatTensor({2}, {2, 3});
  EXPECT_EQ(TensorListJson(two), "[[1],[2,3]]");
}

TEST(ClientMapTensorsTest, ViewsAsMatrices) {
  const cv::Mat grid = GridMat(FloatTensor({2, 3}, {0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(grid.size(), cv::Size(3, 2));
  EXPECT_FLOAT_EQ(grid.at<float>(1, 2), 5);
  const cv::Mat mean = HeadMeanMat(FloatTensor({2, 1, 2}, {1, 2, 3, 4}));
  EXPECT_FLOAT_EQ(mean.at<float>(0, 0), 2);
  EXPECT_FLOAT_EQ(mean.at<float>(0, 1), 3);
  // Class token, then a 2x2 grid.
  const cv::Mat row = GateRowMat(FloatTensor({1, 5}, {9, 1, 2, 3, 4}));
  EXPECT_EQ(row.size(), cv::Size(2, 2));
  EXPECT_FLOAT_EQ(row.at<float>(1, 1), 4);
  EXPECT_TRUE(GateRowMat(FloatTensor({1, 4}, {9, 1, 2, 3})).empty());
}

}  // namespace
}  // namespace gatescope::client
