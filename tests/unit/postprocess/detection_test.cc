#include "server/postprocess/detection.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace gatescope {
namespace {

// Three queries, four classes: (query 1, class 2) scores sigmoid(5), (query 0, class 3)
// sigmoid(1), (query 2, class 0) sigmoid(0) = 0.5; the rest sigmoid(-10).
struct Outputs {
  at::Tensor logits = at::full({3, 4}, -10.f);
  at::Tensor boxes = at::tensor({0.5f, 0.5f, 0.2f, 0.2f,    // query 0
                                 0.25f, 0.5f, 0.5f, 1.0f,   // query 1
                                 0.1f, 0.1f, 0.1f, 0.1f})   // query 2
                         .reshape({3, 4});
  Outputs() {
    logits[1][2] = 5.f;
    logits[0][3] = 1.f;
    logits[2][0] = 0.f;
  }
};

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

TEST(DecodeDetectionsTest, TopScoresAboveTheThresholdInPixels) {
  Outputs o;
  auto dets = DecodeDetections(o.logits, o.boxes, /*height=*/100, /*width=*/200, {0.6f, 5});
  ASSERT_TRUE(dets.ok()) << dets.status();
  ASSERT_EQ(dets->size(), 2u);  // sigmoid(0) = 0.5 is not above 0.6
  const Detection& a = (*dets)[0];
  EXPECT_EQ(a.query, 1);
  EXPECT_EQ(a.label, 2);
  EXPECT_FLOAT_EQ(a.score, Sigmoid(5.f));
  // (0.25, 0.5, 0.5, 1.0) of a 200 x 100 image: x 0..100, y 0..100.
  EXPECT_FLOAT_EQ(a.x1, 0.f);
  EXPECT_FLOAT_EQ(a.y1, 0.f);
  EXPECT_FLOAT_EQ(a.x2, 100.f);
  EXPECT_FLOAT_EQ(a.y2, 100.f);
  const Detection& b = (*dets)[1];
  EXPECT_EQ(b.query, 0);
  EXPECT_EQ(b.label, 3);
  EXPECT_FLOAT_EQ(b.x1, 80.f);
  EXPECT_FLOAT_EQ(b.y1, 40.f);
  EXPECT_FLOAT_EQ(b.x2, 120.f);
  EXPECT_FLOAT_EQ(b.y2, 60.f);
}

TEST(DecodeDetectionsTest, MaxDetectionsCutsBeforeTheThreshold) {
  Outputs o;
  auto one = DecodeDetections(o.logits, o.boxes, 100, 200, {0.f, 1});
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].label, 2);
  // More than Q * C asked: every pair, all above 0.
  auto all = DecodeDetections(o.logits, o.boxes, 100, 200, {0.f, 1000});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 12u);
  for (size_t i = 1; i < all->size(); ++i) EXPECT_GE((*all)[i - 1].score, (*all)[i].score);
}

TEST(DecodeDetectionsTest, MalformedOutputsAreInternal) {
  Outputs o;
  EXPECT_EQ(DecodeDetections(o.logits, o.boxes.narrow(0, 0, 2), 10, 10, {0.f, 5}).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(DecodeDetections(o.logits.reshape({12}), o.boxes, 10, 10, {0.f, 5}).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(DecodeDetections(o.logits, o.boxes, 0, 10, {0.f, 5}).status().code(),
            absl::StatusCode::kInternal);
}

TEST(DecodeDetectionsTest, NonFiniteOutputsAreInternal) {
  Outputs o;
  o.logits[2][1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(DecodeDetections(o.logits, o.boxes, 10, 10, {0.f, 5}).status().code(),
            absl::StatusCode::kInternal);
  Outputs p;
  p.boxes[0][2] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(DecodeDetections(p.logits, p.boxes, 10, 10, {0.f, 5}).status().code(),
            absl::StatusCode::kInternal);
}

TEST(ResolveDetectionOptionsTest, DefaultsAndBounds) {
  v1::DetectionConfig config;
  config.set_score_threshold(0.3f);
  config.set_max_detections(100);
  auto defaults = ResolveDetectionOptions(config, std::nullopt, 0);
  ASSERT_TRUE(defaults.ok());
  EXPECT_FLOAT_EQ(defaults->score_threshold, 0.3f);
  EXPECT_EQ(defaults->max_detections, 100);
  auto given = ResolveDetectionOptions(config, 0.f, 7);
  ASSERT_TRUE(given.ok());
  EXPECT_FLOAT_EQ(given->score_threshold, 0.f);
  EXPECT_EQ(given->max_detections, 7);
  for (float bad : {1.f, -0.01f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_EQ(ResolveDetectionOptions(config, bad, 0).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(ResolveDetectionOptions(config, std::nullopt, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
