#include "client/requests.h"

#include <gtest/gtest.h>

namespace gatescope::client {
namespace {

TEST(ClientRequestsTest, PredictSendsAnImageOrARawTensor) {
  PredictOptions o;
  o.target.model = "m";
  o.target.version = "2";
  o.top_k = 3;
  v1::PredictRequest image = PredictRequestFor(o, "png bytes");
  EXPECT_EQ(image.model_name(), "m");
  EXPECT_EQ(image.model_version(), "2");
  EXPECT_EQ(image.top_k(), 3);
  EXPECT_EQ(image.image(), "png bytes");
  EXPECT_FALSE(image.mask_png());
  EXPECT_FALSE(image.has_score_threshold());
  EXPECT_EQ(image.max_detections(), 0);

  o.raw_shape = {1, 28, 28};
  o.raw_dtype = "float32";
  v1::PredictRequest raw = PredictRequestFor(o, "raw");
  ASSERT_TRUE(raw.has_tensor());
  EXPECT_EQ(raw.tensor().dtype(), v1::Tensor::FLOAT32);
  EXPECT_EQ(std::vector<int64_t>(raw.tensor().shape().begin(), raw.tensor().shape().end()),
            (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(raw.tensor().data(), "raw");
}

TEST(ClientRequestsTest, PredictAsksForFilesOnlyWithAnOutputDirectory) {
  PredictOptions o;
  o.probabilities = true;
  EXPECT_FALSE(PredictRequestFor(o, "").class_probabilities());
  o.out_dir = "/tmp/x";
  const v1::PredictRequest r = PredictRequestFor(o, "");
  EXPECT_TRUE(r.mask_png());
  EXPECT_TRUE(r.class_probabilities());
}

TEST(ClientRequestsTest, DetectionSettingsAreSentOnlyWhenGiven) {
  PredictOptions o;
  o.detection.score_threshold = 0.25f;
  o.detection.max_detections = 4;
  const v1::PredictRequest r = PredictRequestFor(o, "");
  EXPECT_TRUE(r.has_score_threshold());
  EXPECT_FLOAT_EQ(r.score_threshold(), 0.25f);
  EXPECT_EQ(r.max_detections(), 4);
}

TEST(ClientRequestsTest, RolloutSettingsStayEmptyUnlessGiven) {
  ExplainOptions o;
  o.target.model = "m";
  v1::ExplainRequest plain = ExplainRequestFor(o, "img");
  EXPECT_EQ(plain.rollout_options().head_fusion(), "");
  EXPECT_EQ(plain.rollout_options().signed_maps(), "");
  EXPECT_FALSE(plain.rollout());
  EXPECT_FALSE(plain.has_query_pixel());

  o.rollout = true;
  o.rollout_flags.head_fusion = "max";
  o.rollout_flags.discard_ratio = 0.5;
  o.layers = {0, 2};
  o.queries = {5};
  o.query = QueryPoint{100, 90};
  v1::ExplainRequest r = ExplainRequestFor(o, "img");
  EXPECT_TRUE(r.rollout());
  EXPECT_TRUE(r.heatmap_png());
  EXPECT_EQ(r.rollout_options().head_fusion(), "max");
  EXPECT_DOUBLE_EQ(r.rollout_options().discard_ratio(), 0.5);
  EXPECT_EQ(r.attention_layers_size(), 2);
  EXPECT_EQ(r.attention_queries(0), 5);
  EXPECT_EQ(r.query_pixel().y(), 100);
  EXPECT_EQ(r.query_pixel().x(), 90);
  EXPECT_EQ(r.image(), "img");

  v1::ExplainRequest other = RolloutRequestFor(o, "other", "img");
  EXPECT_EQ(other.model_name(), "other");
  EXPECT_FALSE(other.rollout());
  EXPECT_EQ(other.attention_layers_size(), 0);
}

}  // namespace
}  // namespace gatescope::client
