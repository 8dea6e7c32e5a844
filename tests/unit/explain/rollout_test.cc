#include "server/explain/rollout.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <limits>
#include <vector>

#include "server/explain/explanation.h"
#include "server/explain/heatmap.h"

namespace gatescope {
namespace {

TEST(RolloutTest, UniformAttentionGivesUniformRows) {
  // Mean of uniform heads is uniform: (U + I) normalised, rolled out, stays row-stochastic.
  const int64_t n = 5;
  std::vector<at::Tensor> layers(3, at::full({2, n, n}, 1.0 / n, at::kDouble));
  auto r = AttentionRollout(layers, RolloutOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(at::allclose(r->sum(-1), at::ones({n}, at::kDouble)));
  // One layer: (U + I) / 2 -> diagonal 0.6, off-diagonal 0.1; by symmetry the product keeps
  // that form; check the single-layer case exactly.
  auto one = AttentionRollout({layers[0]}, RolloutOptions());
  EXPECT_NEAR((*one)[0][0].item<double>(), 0.6, 1e-12);
  EXPECT_NEAR((*one)[0][1].item<double>(), 0.1, 1e-12);
}

TEST(RolloutTest, SignedHandlingAndFusion) {
  at::Tensor maps = at::zeros({2, 2, 2}, at::kDouble);
  maps[0][0][1] = -0.5;  // an inhibitory weight
  maps[1][0][1] = 0.3;
  RolloutOptions clamp;  // mean of {0, 0.3} = 0.15 -> row 0: [1, 0.15] / 1.15
  auto c = AttentionRollout({maps}, clamp);
  EXPECT_NEAR((*c)[0][1].item<double>(), 0.15 / 1.15, 1e-12);
  RolloutOptions abs;
  abs.signed_maps = "abs";
  abs.head_fusion = "max";  // max of {0.5, 0.3} = 0.5 -> 0.5 / 1.5
  auto a = AttentionRollout({maps}, abs);
  EXPECT_NEAR((*a)[0][1].item<double>(), 0.5 / 1.5, 1e-12);
  RolloutOptions raw;
  raw.signed_maps = "raw";
  raw.head_fusion = "min";  // min = -0.5 -> row [1, -0.5] / 0.5
  auto w = AttentionRollout({maps}, raw);
  EXPECT_NEAR((*w)[0][1].item<double>(), -1.0, 1e-12);
}

TEST(RolloutTest, RowsSummingToZeroStayIdentity) {
  at::Tensor maps = at::zeros({1, 2, 2}, at::kDouble);
  maps[0][0][0] = -1.0;  // row 0 of A + I sums to 0
  RolloutOptions raw;
  raw.signed_maps = "raw";
  auto r = AttentionRollout({maps}, raw);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(at::isfinite(*r).all().item<bool>());
  EXPECT_DOUBLE_EQ((*r)[0][0].item<double>(), 1.0);
}

TEST(RolloutTest, RejectsBadOptions) {
  std::vector<at::Tensor> layers(2, at::full({1, 3, 3}, 1.0 / 3));
  RolloutOptions o;
  o.discard_ratio = 1.0;
  EXPECT_EQ(AttentionRollout(layers, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = RolloutOptions();
  o.start_layer = 2;
  EXPECT_FALSE(AttentionRollout(layers, o).ok());
  o = RolloutOptions();
  o.head_fusion = "median";
  EXPECT_FALSE(AttentionRollout(layers, o).ok());
  EXPECT_FALSE(AttentionRollout({}, RolloutOptions()).ok());
  EXPECT_FALSE(AttentionRollout({at::zeros({1, 3, 4})}, RolloutOptions()).ok());
}

TEST(HeatmapTest, OverlayHasTheInputsSize) {
  cv::Mat img(40, 60, CV_8UC1, cv::Scalar(128));
  std::vector<uchar> buf;
  ASSERT_TRUE(cv::imencode(".png", img, buf));
  auto png = RenderOverlayPng(at::rand({4, 4}), std::string(buf.begin(), buf.end()));
  ASSERT_TRUE(png.ok()) << png.status();
  const cv::Mat raw(1, static_cast<int>(png->size()), CV_8UC1, png->data());
  const cv::Mat decoded = cv::imdecode(raw, cv::IMREAD_COLOR);
  EXPECT_EQ(decoded.rows, 40);
  EXPECT_EQ(decoded.cols, 60);
  EXPECT_FALSE(RenderOverlayPng(at::rand({4, 4}), "junk").ok());
  at::Tensor odd = at::rand({4, 4});
  odd[1][1] = std::numeric_limits<float>::quiet_NaN();
  odd[2][2] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(RenderOverlayPng(odd, std::string(buf.begin(), buf.end())).ok());
  EXPECT_TRUE(RenderOverlayPng(at::zeros({4, 4}), std::string(buf.begin(), buf.end())).ok());
}

TEST(ExplanationTest, ShapesAreCheckedAgainstTheGrid) {
  NamedTensors maps{{"attention.0", at::full({2, 5, 5}, 0.2)},
                    {"attention.1", at::full({2, 5, 5}, 0.2)},
                    {"gate.0", at::rand({2, 5})}};
  ExplainOptions o;
  o.rollout = o.gates = true;
  o.grid_h = o.grid_w = 2;
  o.attention_layers = {1};
  auto ok = BuildExplanation(maps, o);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->rollout.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ok->gates.size(), 1u);
  EXPECT_EQ(ok->gates[0].sizes(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_TRUE(at::allclose(ok->gates[0].reshape({2, 4}), maps.at("gate.0").narrow(1, 1, 4)));
  EXPECT_EQ(CountLayers(maps, "attention"), 2);

  ExplainOptions bad_grid = o;
  bad_grid.grid_h = bad_grid.grid_w = -2;  // (-2)(-2) + 1 == 5 tokens, still refused
  EXPECT_EQ(BuildExplanation(maps, bad_grid).status().code(), absl::StatusCode::kInvalidArgument);
  NamedTensors short_gate = maps;
  short_gate["gate.0"] = at::rand({2, 3});
  EXPECT_EQ(BuildExplanation(short_gate, o).status().code(), absl::StatusCode::kInvalidArgument);
  ExplainOptions bad_layer = o;
  bad_layer.attention_layers = {2};
  EXPECT_EQ(BuildExplanation(maps, bad_layer).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
