#include "server/explain/detection_maps.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

namespace gatescope {
namespace {

// 1 encoder + 2 decoder layers, 3 queries, 2 heads, 2 levels, 1 point.
DetectionMapLayout Layout() {
  DetectionMapLayout layout;
  layout.encoder_layers = 1;
  layout.decoder_layers = 2;
  layout.heads = 2;
  layout.levels = 2;
  layout.points = 1;
  layout.queries = 3;
  layout.has_sampling_points = true;
  layout.has_plug_gate = true;
  layout.level_strides = {2, 4};
  layout.canvas = {8, 10};  // EncoderMaps' grids are those of an 8 x 10 input
  return layout;
}

// Decoder layer `layer`'s maps; every value encodes (layer, query) so picks are checkable.
NamedTensors DecoderMaps(int layer) {
  at::Tensor q = at::arange(3, at::kFloat).view({3, 1, 1, 1, 1});
  NamedTensors maps;
  maps["sampling_locations"] = (q * 0.1f + 0.01f * layer).expand({3, 2, 2, 1, 2}).contiguous();
  maps["attention_weights"] = (q.view({3, 1, 1, 1}) * 0.01f + 0.25f).expand({3, 2, 2, 1}).contiguous();
  maps["plug_gate"] = (q.view({3, 1, 1}) + 10.f * layer).expand({3, 2, 2}).contiguous();
  return maps;
}

NamedTensors EncoderMaps() {
  NamedTensors maps;
  maps["plug_gate_level0"] = at::ones({2, 2, 4, 5});
  maps["plug_gate_level1"] = at::ones({2, 2, 2, 3});
  return maps;
}

TEST(DetectionMapCollectorTest, PicksTheDetectedQueriesAndScalesToPixels) {
  auto created = DetectionMapCollector::Create(Layout(), {/*plug_gates=*/true}, 1 << 20);
  ASSERT_TRUE(created.ok()) << created.status();
  DetectionMapCollector& c = **created;
  ASSERT_TRUE(c.AddLayer(0, EncoderMaps()).ok());
  ASSERT_TRUE(c.AddLayer(1, DecoderMaps(0)).ok());
  ASSERT_TRUE(c.AddLayer(2, DecoderMaps(1)).ok());
  Detection d;
  d.query = 2;
  auto ex = c.Finish({d}, /*height=*/50, /*width=*/100);
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->detections.size(), 1u);
  const DetectionMapsOf& m = ex->detections[0];
  ASSERT_EQ(m.sampling_points.sizes(), (std::vector<int64_t>{2, 2, 2, 1, 2}));
  // Query 2, layer 1: 0.21 normalised -> x 21 px, y 10.5 px.
  EXPECT_NEAR(m.sampling_points[1][0][0][0][0].item<float>(), 21.f, 1e-4);
  EXPECT_NEAR(m.sampling_points[1][0][0][0][1].item<float>(), 10.5f, 1e-4);
  EXPECT_NEAR(m.sampling_points[0][1][1][0][0].item<float>(), 20.f, 1e-4);
  EXPECT_EQ(m.plug_gate.sizes(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_FLOAT_EQ(m.plug_gate[0][0][0].item<float>(), 2.f);
  EXPECT_FLOAT_EQ(m.plug_gate[1][1][1].item<float>(), 12.f);
  EXPECT_EQ(m.attention_weights.sizes(), (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_FLOAT_EQ(m.attention_weights[1][1][0][0].item<float>(), 0.27f);
  ASSERT_EQ(ex->encoder_plug_gates.size(), 2u);
  EXPECT_EQ(ex->encoder_plug_gates[1].sizes(), (std::vector<int64_t>{2, 2, 2, 3}));
}

TEST(DetectionMapCollectorTest, WithoutPlugGatesKeepsNone) {
  auto created = DetectionMapCollector::Create(Layout(), {/*plug_gates=*/false}, 1 << 20);
  ASSERT_TRUE(created.ok());
  DetectionMapCollector& c = **created;
  ASSERT_TRUE(c.AddLayer(0, {}).ok());  // encoder maps are not needed
  ASSERT_TRUE(c.AddLayer(1, DecoderMaps(0)).ok());
  ASSERT_TRUE(c.AddLayer(2, DecoderMaps(1)).ok());
  auto ex = c.Finish({Detection{}}, 10, 10);
  ASSERT_TRUE(ex.ok());
  EXPECT_FALSE(ex->detections[0].plug_gate.defined());
  EXPECT_TRUE(ex->encoder_plug_gates.empty());
}

TEST(DetectionMapCollectorTest, RefusesWhatTheModelCannotGive) {
  DetectionMapLayout plain = Layout();
  plain.has_plug_gate = false;
  EXPECT_EQ(DetectionMapCollector::Create(plain, {true}, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  DetectionMapLayout none = Layout();
  none.has_sampling_points = false;
  EXPECT_EQ(DetectionMapCollector::Create(none, {false}, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DetectionMapCollectorTest, MisshapenMissingOrTooLargeMapsFail) {
  auto c = *DetectionMapCollector::Create(Layout(), {true}, 1 << 20);
  ASSERT_TRUE(c->AddLayer(0, EncoderMaps()).ok());
  NamedTensors bad = DecoderMaps(0);
  bad["sampling_locations"] = at::zeros({3, 2, 2, 2, 2});  // 2 points, the layout says 1
  EXPECT_EQ(c->AddLayer(1, bad).code(), absl::StatusCode::kInternal);

  auto d = *DetectionMapCollector::Create(Layout(), {true}, 1 << 20);
  EXPECT_EQ(d->AddLayer(0, {}).code(), absl::StatusCode::kInternal);  // gates missing
  EXPECT_EQ(d->AddLayer(2, DecoderMaps(0)).code(), absl::StatusCode::kInternal);  // order

  auto small = *DetectionMapCollector::Create(Layout(), {true}, 64);
  EXPECT_EQ(small->AddLayer(0, EncoderMaps()).code(), absl::StatusCode::kResourceExhausted);
  // Kept decoder maps: 2 layers x 36 floats = 288 bytes; each detection's cut-out maps
  // 24 floats = 96 bytes. A cap of 388 bytes admits one detection, not two.
  auto tight = [] {
    auto c = *DetectionMapCollector::Create(Layout(), {false}, 388);
    EXPECT_TRUE(c->AddLayer(0, {}).ok());
    EXPECT_TRUE(c->AddLayer(1, DecoderMaps(0)).ok());
    EXPECT_TRUE(c->AddLayer(2, DecoderMaps(1)).ok());
    return c;
  };
  EXPECT_TRUE(tight()->Finish({Detection{}}, 10, 10).ok());
  EXPECT_EQ(tight()->Finish({Detection{}, Detection{}}, 10, 10).status().code(),
            absl::StatusCode::kResourceExhausted);

  auto early = *DetectionMapCollector::Create(Layout(), {false}, 1 << 20);
  EXPECT_EQ(early->Finish({}, 10, 10).status().code(), absl::StatusCode::kInternal);
  Detection out_of_range;
  out_of_range.query = 3;
  auto full = *DetectionMapCollector::Create(Layout(), {false}, 1 << 20);
  ASSERT_TRUE(full->AddLayer(0, {}).ok());
  ASSERT_TRUE(full->AddLayer(1, DecoderMaps(0)).ok());
  ASSERT_TRUE(full->AddLayer(2, DecoderMaps(1)).ok());
  EXPECT_EQ(full->Finish({out_of_range}, 10, 10).status().code(), absl::StatusCode::kInternal);
}

TEST(DetectionMapCollectorTest, PeakBytesGrowWithTheInputBeyondTheCanvas) {
  // Per query and decoder layer 2 heads x 2 levels x 1 point x 3 + 2 x 2 gates = 16
  // floats; a decoder layer 3 x 16 = 48; an encoder layer of an 8 x 10 input 2 x 2 x
  // (4 x 5 + 2 x 3) = 104. Peak: 104 (one layer) + 2 x 48 (kept) + 104 (encoder gates) +
  // 1 detection x 2 layers x 16 = 336 floats.
  auto c = *DetectionMapCollector::Create(Layout(), {true, 1}, 1 << 20);
  EXPECT_EQ(c->PeakBytes({8, 10}), 336 * 4);
  EXPECT_EQ(c->PeakBytes({4, 4}), 336 * 4);  // padded to the canvas
  // 16 x 20: encoder layer 2 x 2 x (8 x 10 + 4 x 5) = 400 floats.
  EXPECT_EQ(c->PeakBytes({16, 20}), (400 + 96 + 400 + 32) * 4);
  auto capped = *DetectionMapCollector::Create(Layout(), {true, 1}, 336 * 4);
  EXPECT_TRUE(capped->CheckBudget({8, 10}).ok());
  EXPECT_EQ(capped->CheckBudget({16, 20}).code(), absl::StatusCode::kResourceExhausted);
  // Without plug_gates the encoder maps are not kept, and more detections cost more.
  auto plain = *DetectionMapCollector::Create(Layout(), {false, 3}, 1 << 20);
  EXPECT_EQ(plain->PeakBytes({8, 10}), (104 + 96 + 3 * 32) * 4);
  DetectionMapLayout no_strides = Layout();
  no_strides.level_strides.clear();
  EXPECT_EQ(DetectionMapCollector::Create(no_strides, {true, 1}, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatescope
