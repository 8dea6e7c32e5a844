#include "server/repository/metrics_observer.h"

#include <gtest/gtest.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <limits>
#include <map>
#include <memory>

namespace gatescope {
namespace {

// Sum and count of each layer's series of the histogram `family` for model "m".
std::map<std::string, std::pair<double, uint64_t>> LayerTotals(prometheus::Registry& registry,
                                                               const std::string& family) {
  std::map<std::string, std::pair<double, uint64_t>> totals;
  for (const auto& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const auto& metric : f.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "layer") {
          totals[label.value] = {metric.histogram.sample_sum, metric.histogram.sample_count};
        }
      }
    }
  }
  return totals;
}

TEST(MetricsObserverTest, LayerStatisticsSkipNonFiniteValues) {
  auto registry = std::make_shared<prometheus::Registry>();
  ServerMetrics metrics(registry);
  MetricsObserver observer(metrics.ForModel("m"));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Two examples, two layers: one NaN and one infinity among them.
  observer.Outputs({{"gate_mean", at::tensor({0.5f, nan, 0.75f, 0.25f}).view({2, 2})},
                    {"vigilance_mean", at::tensor({inf, 0.125f}).view({1, 2})}});
  auto gates = LayerTotals(*registry, "gatescope_gate_mean");
  EXPECT_DOUBLE_EQ(gates["0"].first, 1.25);
  EXPECT_EQ(gates["0"].second, 2u);
  EXPECT_DOUBLE_EQ(gates["1"].first, 0.25);
  EXPECT_EQ(gates["1"].second, 1u);
  auto vigilance = LayerTotals(*registry, "gatescope_vigilance_crossing");
  EXPECT_EQ(vigilance.count("0"), 0u);  // never observed: no series
  EXPECT_DOUBLE_EQ(vigilance["1"].first, 0.125);
}

TEST(MetricsObserverTest, PlugAndGdlaGatesAreObservedPerLayer) {
  auto registry = std::make_shared<prometheus::Registry>();
  ServerMetrics metrics(registry);
  MetricsObserver observer(metrics.ForModel("m"));
  // PLuG: two examples, two layers; GDLA: one example, three decoder stages.
  observer.Outputs({{"logits", at::zeros({2, 10})},
                    {"plug_scale_mean", at::tensor({0.875f, 1.5f, 0.75f, 1.25f}).view({2, 2})},
                    {"gdla_gate_mean", at::tensor({0.375f, 0.5f, 0.625f}).view({1, 3})}});
  auto plug = LayerTotals(*registry, "gatescope_plug_scale_mean");
  EXPECT_DOUBLE_EQ(plug["0"].first, 1.625);
  EXPECT_EQ(plug["0"].second, 2u);
  EXPECT_DOUBLE_EQ(plug["1"].first, 2.75);
  auto gdla = LayerTotals(*registry, "gatescope_gdla_gate_mean");
  ASSERT_EQ(gdla.size(), 3u);
  EXPECT_DOUBLE_EQ(gdla["2"].first, 0.625);
  EXPECT_EQ(gdla["2"].second, 1u);
  EXPECT_TRUE(LayerTotals(*registry, "gatescope_gate_mean").empty());
}

}  // namespace
}  // namespace gatescope
