#include "server/frontend/grpc/segmentation_call.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gatescope {
namespace {

TEST(QueryPointTest, PixelCentresInUnitCoordinates) {
  v1::QueryPixel p;
  p.set_y(120);
  p.set_x(40);
  auto q = QueryPoint(p, {300, 250});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(*q, (std::vector<double>{120.5 / 300, 40.5 / 250}));
  p.set_y(299);
  p.set_x(249);
  EXPECT_TRUE(QueryPoint(p, {300, 250}).ok());
}

TEST(QueryPointTest, OutsideTheInputIsInvalid) {
  for (auto [y, x] : std::vector<std::pair<int, int>>{{300, 0}, {0, 250}, {-1, 0}, {0, -1}}) {
    v1::QueryPixel p;
    p.set_y(y);
    p.set_x(x);
    EXPECT_EQ(QueryPoint(p, {300, 250}).status().code(), absl::StatusCode::kInvalidArgument)
        << y << "," << x;
  }
}

TEST(FillSegmentationTest, MaskCountsAndOptionalParts) {
  // Two classes on 2x2; class 1 wins in the right column.
  const at::Tensor logits = at::tensor({1.f, 0.f, 1.f, 0.f, 0.f, 2.f, 0.f, 2.f}).reshape({2, 2, 2});
  v1::Segmentation seg;
  SegmentationOptions options;
  options.png = true;
  options.probabilities = true;
  ASSERT_TRUE(FillSegmentation({{"logits", logits}}, {4, 6}, options, &seg).ok());
  EXPECT_EQ(seg.mask().dtype(), v1::Tensor::UINT8);
  EXPECT_EQ(std::vector<int64_t>(seg.mask().shape().begin(), seg.mask().shape().end()),
            (std::vector<int64_t>{4, 6}));
  ASSERT_EQ(seg.mask().data().size(), 24u);
  EXPECT_EQ(seg.class_pixels_size(), 2);
  EXPECT_EQ(seg.class_pixels(0) + seg.class_pixels(1), 24);
  EXPECT_EQ(seg.mask().data()[0], 0);
  EXPECT_EQ(seg.mask().data()[5], 1);
  EXPECT_FALSE(seg.mask_png().empty());
  EXPECT_EQ(seg.probabilities().dtype(), v1::Tensor::FLOAT32);
  EXPECT_EQ(seg.probabilities().data().size(), 2u * 24 * 4);

  v1::Segmentation plain;
  ASSERT_TRUE(FillSegmentation({{"logits", logits}}, {2, 2}, {}, &plain).ok());
  EXPECT_TRUE(plain.mask_png().empty());
  EXPECT_FALSE(plain.has_probabilities());
  EXPECT_EQ(FillSegmentation({}, {2, 2}, {}, &plain).code(), absl::StatusCode::kInternal);
}

TEST(DenseLayoutOfTest, ReadsStagesMapsAndInputSize) {
  ModelConfig config;
  config.set_layers(3);
  config.add_maps("attention");
  for (int64_t d : {1, 224, 192}) config.mutable_input()->add_shape(d);
  DenseMapLayout layout = DenseLayoutOf(config);
  EXPECT_EQ(layout.stages, 3);
  EXPECT_TRUE(layout.has_attention);
  EXPECT_FALSE(layout.has_gate);
  EXPECT_EQ(layout.height, 224);
  EXPECT_EQ(layout.width, 192);
}

}  // namespace
}  // namespace gatescope
