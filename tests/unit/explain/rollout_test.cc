#include "server/explain/rollout.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <limits>
#include <vector>

#include "server/explain/token_maps.h"
#include "server/explain/colour_scale.h"
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

TEST(HeatmapTest, OverlayIsTheInputEnlargedToAWholeFactorOverItsColourBar) {
  cv::Mat img(40, 60, CV_8UC1, cv::Scalar(128));
  std::vector<uchar> buf;
  ASSERT_TRUE(cv::imencode(".png", img, buf));
  auto png = RenderOverlayPng(at::rand({4, 4}), std::string(buf.begin(), buf.end()));
  ASSERT_TRUE(png.ok()) << png.status();
  const cv::Mat raw(1, static_cast<int>(png->size()), CV_8UC1, png->data());
  const cv::Mat decoded = cv::imdecode(raw, cv::IMREAD_COLOR);
  // 60 px wide: enlarged 3x to reach 160 px for the bar, which is drawn under the map.
  EXPECT_EQ(decoded.cols, 180);
  EXPECT_EQ(decoded.rows, 120 + kColourBarHeight);
  EXPECT_FALSE(RenderOverlayPng(at::rand({4, 4}), "junk").ok());
  at::Tensor odd = at::rand({4, 4});
  odd[1][1] = std::numeric_limits<float>::quiet_NaN();
  odd[2][2] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(RenderOverlayPng(odd, std::string(buf.begin(), buf.end())).ok());
  EXPECT_TRUE(RenderOverlayPng(at::zeros({4, 4}), std::string(buf.begin(), buf.end())).ok());
  // A 1-pixel-wide, 8192-pixel-high input is enlarged only as far as 4 Mpx allows (22x)
  // and padded to the bar's width, never 160x.
  cv::Mat tall(8192, 1, CV_8UC1, cv::Scalar(7));
  ASSERT_TRUE(cv::imencode(".png", tall, buf));
  auto tall_png = RenderOverlayPng(at::rand({4, 4}), std::string(buf.begin(), buf.end()));
  ASSERT_TRUE(tall_png.ok()) << tall_png.status();
  const cv::Mat tall_raw(1, static_cast<int>(tall_png->size()), CV_8UC1, tall_png->data());
  const cv::Mat tall_decoded = cv::imdecode(tall_raw, cv::IMREAD_COLOR);
  EXPECT_EQ(tall_decoded.rows, 8192 * 22 + kColourBarHeight);
  EXPECT_EQ(tall_decoded.cols, 160);
}

MapLayout TwoByTwo(bool gate, bool resonance) {
  MapLayout layout;
  layout.layers = 2;
  layout.heads = 2;
  layout.grid_h = layout.grid_w = 2;  // 5 tokens with the class token
  layout.has_gate = gate;
  layout.has_resonance = resonance;
  return layout;
}

NamedTensors LayerMaps(int seed) {
  at::manual_seed(seed);
  return {{"attention", at::softmax(at::randn({2, 5, 5}), -1)},
          {"gate", at::rand({2, 5})},
          {"resonance", at::rand({2, 5, 5})},
          {"vigilance", at::rand({2})}};
}

constexpr int64_t kBig = int64_t{1} << 30;

TEST(ExplanationTest, BuildsLayerByLayer) {
  ExplainOptions o;
  o.rollout = o.gates = o.resonance = true;
  o.attention_layers = {1};
  auto builder = TokenMapCollector::Create(TwoByTwo(true, true), o, kBig);
  ASSERT_TRUE(builder.ok()) << builder.status();
  const NamedTensors l0 = LayerMaps(0), l1 = LayerMaps(1);
  ASSERT_TRUE((*builder)->AddLayer(0, l0).ok());
  ASSERT_TRUE((*builder)->AddLayer(1, l1).ok());
  auto ex = (*builder)->Finish();
  ASSERT_TRUE(ex.ok()) << ex.status();
  // Rollout equals the all-at-once rollout's class row over the patches.
  auto full = AttentionRollout({l0.at("attention"), l1.at("attention")}, o.rollout_options);
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(at::allclose(ex->rollout.reshape({4}), (*full)[0].narrow(0, 1, 4).to(at::kFloat)));
  ASSERT_EQ(ex->gates.size(), 2u);
  EXPECT_EQ(ex->gates[1].sizes(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_TRUE(at::equal(ex->gates[1].reshape({2, 4}), l1.at("gate").narrow(1, 1, 4)));
  ASSERT_EQ(ex->resonance.size(), 2u);
  EXPECT_TRUE(at::equal(ex->resonance[0].reshape({2, 4}),
                        l0.at("resonance").select(1, 0).narrow(1, 1, 4)));
  EXPECT_TRUE(at::equal(ex->vigilance, at::stack({l0.at("vigilance"), l1.at("vigilance")})));
  ASSERT_EQ(ex->attention.size(), 1u);
  EXPECT_TRUE(at::equal(ex->attention[0], l1.at("attention")));
  ASSERT_EQ(ex->attention_resonance.size(), 1u);
  EXPECT_TRUE(at::equal(ex->attention_resonance[0], l1.at("resonance")));
}

TEST(ExplanationTest, SelectsHeadsAndQueryTokens) {
  ExplainOptions o;
  o.attention_layers = {0};
  o.attention_heads = {1};
  o.attention_queries = {0, 3};
  o.resonance = true;
  auto builder = TokenMapCollector::Create(TwoByTwo(false, true), o, kBig);
  ASSERT_TRUE(builder.ok()) << builder.status();
  const NamedTensors l0 = LayerMaps(0);
  ASSERT_TRUE((*builder)->AddLayer(0, l0).ok());
  ASSERT_TRUE((*builder)->AddLayer(1, LayerMaps(1)).ok());
  auto ex = (*builder)->Finish();
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->attention.size(), 1u);
  EXPECT_EQ(ex->attention[0].sizes(), (std::vector<int64_t>{1, 2, 5}));
  EXPECT_TRUE(at::equal(ex->attention[0][0][1], l0.at("attention")[1][3]));
  EXPECT_TRUE(at::equal(ex->attention_resonance[0][0][0], l0.at("resonance")[1][0]));
  ExplainOptions bad_head = o;
  bad_head.attention_heads = {2};
  EXPECT_EQ(TokenMapCollector::Create(TwoByTwo(false, true), bad_head, kBig).status().code(),
            absl::StatusCode::kInvalidArgument);
  ExplainOptions bad_query = o;
  bad_query.attention_queries = {5};
  EXPECT_EQ(TokenMapCollector::Create(TwoByTwo(false, true), bad_query, kBig).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExplanationTest, PlugGateRowsForChosenQueries) {
  MapLayout layout = TwoByTwo(false, false);
  layout.has_plug_gate = true;
  ExplainOptions o;
  o.plug_gates = true;
  o.attention_queries = {0, 4};
  auto builder = TokenMapCollector::Create(layout, o, kBig);
  ASSERT_TRUE(builder.ok()) << builder.status();
  at::manual_seed(3);
  const at::Tensor g0 = at::tanh(at::randn({5, 5})), g1 = at::tanh(at::randn({5, 5}));
  ASSERT_TRUE((*builder)->AddLayer(0, {{"attention", at::softmax(at::randn({2, 5, 5}), -1)},
                                       {"plug_gate", g0}}).ok());
  ASSERT_TRUE((*builder)->AddLayer(1, {{"attention", at::softmax(at::randn({2, 5, 5}), -1)},
                                       {"plug_gate", g1}}).ok());
  auto ex = (*builder)->Finish();
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->plug_gates.size(), 2u);
  EXPECT_EQ(ex->plug_gates[1].sizes(), (std::vector<int64_t>{2, 5}));
  EXPECT_TRUE(at::equal(ex->plug_gates[1][0], g1[0]));
  EXPECT_TRUE(at::equal(ex->plug_gates[1][1], g1[4]));
  // Counted in the byte bound: 2 layers x 2 rows x 5 tokens x 4 bytes, plus the layer's G.
  ExplainOptions none;
  none.rollout = true;
  auto plain = TokenMapCollector::Create(layout, none, kBig);
  ASSERT_TRUE(plain.ok());
  ExplainOptions rows = o;
  rows.rollout = true;
  EXPECT_EQ((*TokenMapCollector::Create(layout, rows, kBig))->PeakBytes({}) - (*plain)->PeakBytes({}),
            2 * 2 * 5 * 4);
  // A model without PLuG gates cannot serve them.
  EXPECT_EQ(TokenMapCollector::Create(TwoByTwo(true, false), o, kBig).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExplanationTest, RefusesWhatTheModelCannotServe) {
  ExplainOptions gates;
  gates.gates = true;
  EXPECT_EQ(TokenMapCollector::Create(TwoByTwo(false, false), gates, kBig).status().code(),
            absl::StatusCode::kInvalidArgument);
  ExplainOptions resonance;
  resonance.resonance = true;
  EXPECT_EQ(TokenMapCollector::Create(TwoByTwo(true, false), resonance, kBig).status().code(),
            absl::StatusCode::kInvalidArgument);
  ExplainOptions layer;
  layer.attention_layers = {2};
  EXPECT_EQ(TokenMapCollector::Create(TwoByTwo(true, true), layer, kBig).status().code(),
            absl::StatusCode::kInvalidArgument);
  ExplainOptions discard;
  discard.rollout = true;
  discard.rollout_options.discard_ratio = 1.0;
  EXPECT_EQ(TokenMapCollector::Create(TwoByTwo(true, true), discard, kBig).status().code(),
            absl::StatusCode::kInvalidArgument);
  MapLayout no_maps = TwoByTwo(true, true);
  no_maps.layers = 0;
  EXPECT_EQ(TokenMapCollector::Create(no_maps, ExplainOptions{}, kBig).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExplanationTest, MapsContradictingTheMetadataAreInternalErrors) {
  ExplainOptions o;
  o.gates = true;
  auto builder = TokenMapCollector::Create(TwoByTwo(true, false), o, kBig);
  ASSERT_TRUE(builder.ok());
  NamedTensors short_gate = LayerMaps(0);
  short_gate["gate"] = at::rand({2, 3});
  EXPECT_EQ((*builder)->AddLayer(0, short_gate).code(), absl::StatusCode::kInternal);
  auto again = TokenMapCollector::Create(TwoByTwo(true, false), o, kBig);
  EXPECT_EQ((*again)->AddLayer(1, LayerMaps(0)).code(), absl::StatusCode::kInternal);  // order
  EXPECT_EQ((*again)->Finish().status().code(), absl::StatusCode::kInternal);  // incomplete
}

TEST(ExplanationTest, PeakBytesFollowsTheDocumentedFormula) {
  // ViT-B/16 size: 12 layers, 12 heads, 14x14 patches + class token = 197 tokens.
  MapLayout vit{12, 12, 14, 14, false, true};
  const int64_t n = 197, map = 12 * n * n * 4;
  ExplainOptions rollout;
  rollout.rollout = true;
  auto b = TokenMapCollector::Create(vit, rollout, kBig);
  ASSERT_TRUE(b.ok());
  // (attention + resonance + 3 transient) maps, gate/vigilance vectors, rollout state.
  EXPECT_EQ((*b)->PeakBytes({}), 5 * map + 2 * 12 * n * 4 + 3 * n * n * 8 + 196 * 4);
  ExplainOptions all_layers = rollout;
  for (int l = 0; l < 12; ++l) all_layers.attention_layers.push_back(l);
  all_layers.resonance = true;
  auto big = TokenMapCollector::Create(vit, all_layers, kBig);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)->PeakBytes({}) - (*b)->PeakBytes({}),
            24 * int64_t{map} + 12 * 12 * 196 * 4 + 12 * 12 * 4);
}

TEST(ExplanationTest, TheByteBudgetIsCheckedBeforeThePassAndLayersComeInOrder) {
  ExplainOptions o;
  o.rollout = true;
  o.attention_layers = {0, 1};
  auto probe = TokenMapCollector::Create(TwoByTwo(false, false), o, kBig);
  ASSERT_TRUE(probe.ok());
  const int64_t peak = (*probe)->PeakBytes({});
  auto tight = TokenMapCollector::Create(TwoByTwo(false, false), o, peak);
  EXPECT_TRUE((*tight)->CheckBudget({}).ok());
  auto over = TokenMapCollector::Create(TwoByTwo(false, false), o, peak - 1);
  const absl::Status st = (*over)->CheckBudget({});
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("cap of " + std::to_string(peak - 1)), absl::string_view::npos);
  // Layers out of order, or missing at the end, are the model's fault.
  EXPECT_EQ((*probe)->AddLayer(1, LayerMaps(0)).code(), absl::StatusCode::kInternal);
  ASSERT_TRUE((*probe)->AddLayer(0, LayerMaps(0)).ok());
  EXPECT_EQ((*probe)->Finish().status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gatescope
