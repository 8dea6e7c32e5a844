#include "server/explain/dense_maps.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

namespace gatescope {
namespace {

DenseMapLayout Gdla() {
  DenseMapLayout layout;
  layout.stages = 3;
  layout.has_attention = true;
  layout.has_gate = true;
  layout.height = 224;
  layout.width = 192;
  return layout;
}

NamedTensors Stage(int s) {
  const int64_t h = 224 >> (4 - s), w = 192 >> (4 - s);
  return {{"gate", at::full({h, w}, 0.1f * (s + 1))}, {"attention", at::full({h, w}, 1.f + s)}};
}

TEST(DenseMapCollectorTest, KeepsTheAskedMapsPerStage) {
  DenseMapOptions options;
  options.gates = true;
  options.query_attention = true;
  auto c = DenseMapCollector::Create(Gdla(), options, 1 << 20);
  ASSERT_TRUE(c.ok()) << c.status();
  for (int s = 0; s < 3; ++s) ASSERT_TRUE((*c)->AddLayer(s, Stage(s)).ok());
  auto maps = (*c)->Finish();
  ASSERT_TRUE(maps.ok()) << maps.status();
  ASSERT_EQ(maps->gates.size(), 3u);
  ASSERT_EQ(maps->query_attention.size(), 3u);
  EXPECT_EQ(maps->gates[0].sizes(), (std::vector<int64_t>{14, 12}));
  EXPECT_EQ(maps->gates[2].sizes(), (std::vector<int64_t>{56, 48}));
  EXPECT_FLOAT_EQ(maps->gates[1][0][0].item<float>(), 0.2f);
  EXPECT_FLOAT_EQ(maps->query_attention[2][5][5].item<float>(), 3.f);
}

TEST(DenseMapCollectorTest, GatesOnlyWhenTheModelHasThem) {
  DenseMapLayout la = Gdla();
  la.has_gate = false;
  DenseMapOptions gates;
  gates.gates = true;
  EXPECT_EQ(DenseMapCollector::Create(la, gates, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  DenseMapOptions query;
  query.query_attention = true;
  auto c = DenseMapCollector::Create(la, query, 1 << 20);
  ASSERT_TRUE(c.ok()) << c.status();
  NamedTensors attention_only = {{"attention", at::ones({14, 12})}};
  EXPECT_TRUE((*c)->AddLayer(0, attention_only).ok());
  la.has_attention = false;
  EXPECT_EQ(DenseMapCollector::Create(la, query, 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DenseMapCollectorTest, BytesAreBounded) {
  DenseMapOptions options;
  options.gates = true;
  options.query_attention = true;
  auto c = DenseMapCollector::Create(Gdla(), options, 1 << 20);
  ASSERT_TRUE(c.ok());
  // Finest grid 56 x 48 floats: two returned maps plus 2 kinds x 3 stages kept.
  EXPECT_EQ((*c)->PeakBytes({}), 8 * 56 * 48 * 4);
  auto over = DenseMapCollector::Create(Gdla(), options, 8 * 56 * 48 * 4 - 1);
  ASSERT_TRUE(over.ok());
  EXPECT_EQ((*over)->CheckBudget({}).code(), absl::StatusCode::kResourceExhausted);
  // A model returning finer maps than its contract says is caught while they are kept.
  auto tight = DenseMapCollector::Create(Gdla(), options, 8 * 56 * 48 * 4);
  ASSERT_TRUE(tight.ok());
  EXPECT_TRUE((*tight)->CheckBudget({}).ok());
  NamedTensors huge = {{"gate", at::zeros({224, 192})}, {"attention", at::zeros({224, 192})}};
  EXPECT_EQ((*tight)->AddLayer(0, huge).code(), absl::StatusCode::kResourceExhausted);
}

TEST(DenseMapCollectorTest, StagesInOrderWithWellFormedMaps) {
  DenseMapOptions options;
  options.gates = true;
  auto c = DenseMapCollector::Create(Gdla(), options, 1 << 20);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->AddLayer(1, Stage(1)).code(), absl::StatusCode::kInternal);
  NamedTensors three_d = {{"gate", at::zeros({1, 14, 12})}};
  EXPECT_EQ((*c)->AddLayer(0, three_d).code(), absl::StatusCode::kInternal);
  EXPECT_EQ((*c)->Finish().status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gatescope
