#include "server/metrics/server_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <limits>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace gatescope {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;

// The series of `family` whose labels include every pair of `labels`; null if none.
const ClientMetric* Find(const std::vector<MetricFamily>& families, const std::string& family,
                         const std::map<std::string, std::string>& labels) {
  for (const auto& f : families) {
    if (f.name != family) continue;
    for (const auto& metric : f.metric) {
      size_t matched = 0;
      for (const auto& label : metric.label) {
        auto it = labels.find(label.name);
        matched += it != labels.end() && it->second == label.value;
      }
      if (matched == labels.size()) return &metric;
    }
  }
  return nullptr;
}

// Not for a temporary Collect(): the series would point into a destroyed vector.
const ClientMetric* Find(std::vector<MetricFamily>&& families, const std::string& family,
                         const std::map<std::string, std::string>& labels) = delete;

// The cumulative count of the bucket whose upper bound is `le` (compared exactly: bounds
// are k / 100.0).
uint64_t CumulativeCount(const ClientMetric& metric, double le) {
  for (const auto& bucket : metric.histogram.bucket) {
    if (bucket.upper_bound == le) return bucket.cumulative_count;
  }
  ADD_FAILURE() << "no bucket le=" << le;
  return 0;
}

class ServerMetricsTest : public ::testing::Test {
 protected:
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  ServerMetrics metrics_{registry_};
};

TEST_F(ServerMetricsTest, GateObservationsLandInHundredthWideBuckets) {
  ModelMetrics* m = metrics_.ForModel("m");
  m->ObserveLayerStatistic("gate_mean", 0, 0.53);
  const auto families = registry_->Collect();
  const ClientMetric* series =
      Find(families, "gatescope_gate_mean", {{"model", "m"}, {"layer", "0"}});
  ASSERT_NE(series, nullptr);
  ASSERT_EQ(series->histogram.bucket.size(), 101u);  // 0.01 .. 1.00, then +Inf
  EXPECT_EQ(series->histogram.bucket.front().upper_bound, 0.01);
  EXPECT_EQ(series->histogram.bucket[99].upper_bound, 1.0);
  EXPECT_EQ(CumulativeCount(*series, 0.52), 0u);
  EXPECT_EQ(CumulativeCount(*series, 0.53), 1u);
  EXPECT_EQ(series->histogram.sample_count, 1u);
  EXPECT_DOUBLE_EQ(series->histogram.sample_sum, 0.53);
}

TEST_F(ServerMetricsTest, ATwoHundredthShiftOfTheMeanShowsInTheBuckets) {
  // The documented shift of DGViT's first layer, 0.54 -> 0.52, falls in distinct buckets.
  ModelMetrics* m = metrics_.ForModel("m");
  m->ObserveLayerStatistic("gate_mean", 0, 0.54);
  m->ObserveLayerStatistic("gate_mean", 1, 0.52);
  const auto families = registry_->Collect();
  const ClientMetric* before = Find(families, "gatescope_gate_mean", {{"layer", "0"}});
  const ClientMetric* after = Find(families, "gatescope_gate_mean", {{"layer", "1"}});
  ASSERT_NE(before, nullptr);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(CumulativeCount(*before, 0.53), 0u);
  EXPECT_EQ(CumulativeCount(*after, 0.53), 1u);
  EXPECT_EQ(CumulativeCount(*after, 0.51), 0u);
}

TEST_F(ServerMetricsTest, EachStatisticHasItsFamilyAndRange) {
  ModelMetrics* m = metrics_.ForModel("m");
  m->ObserveLayerStatistic("vigilance_mean", 3, 0.0964);
  m->ObserveLayerStatistic("plug_scale_mean", 0, 0.9138);
  m->ObserveLayerStatistic("gdla_gate_mean", 2, 0.5245);
  m->ObserveLayerStatistic("no_such_output", 0, 0.5);  // ignored
  const auto families = registry_->Collect();
  const ClientMetric* vigilance = Find(families, "gatescope_vigilance_crossing", {{"layer", "3"}});
  ASSERT_NE(vigilance, nullptr);
  EXPECT_EQ(CumulativeCount(*vigilance, 0.09), 0u);
  EXPECT_EQ(CumulativeCount(*vigilance, 0.1), 1u);
  // PLuG's logit scale 1 + G: buckets from 0.01 to 2.00.
  const ClientMetric* plug = Find(families, "gatescope_plug_scale_mean", {{"layer", "0"}});
  ASSERT_NE(plug, nullptr);
  ASSERT_EQ(plug->histogram.bucket.size(), 201u);
  EXPECT_EQ(plug->histogram.bucket[199].upper_bound, 2.0);
  EXPECT_EQ(CumulativeCount(*plug, 0.91), 0u);
  EXPECT_EQ(CumulativeCount(*plug, 0.92), 1u);
  const ClientMetric* gdla = Find(families, "gatescope_gdla_gate_mean", {{"layer", "2"}});
  ASSERT_NE(gdla, nullptr);
  EXPECT_EQ(CumulativeCount(*gdla, 0.52), 0u);
  EXPECT_EQ(CumulativeCount(*gdla, 0.53), 1u);
  for (const auto& f : families) EXPECT_NE(f.name, "gatescope_no_such_output");
}

TEST_F(ServerMetricsTest, KindSeparatesPredictFromExplain) {
  ModelMetrics* m = metrics_.ForModel("m");
  // Both latency series exist before any request, so rates over them read 0.
  for (const char* kind : {"predict", "explain"}) {
    const auto families = registry_->Collect();
    const ClientMetric* series = Find(families, "gatescope_request_duration_seconds",
                                      {{"model", "m"}, {"kind", kind}});
    ASSERT_NE(series, nullptr) << kind;
    EXPECT_EQ(series->histogram.sample_count, 0u);
  }
  m->RecordRequest(RequestKind::kPredict, "OK", 0.004);
  m->RecordRequest(RequestKind::kPredict, "OK", 0.006);
  m->RecordRequest(RequestKind::kExplain, "OK", 0.3);
  m->RecordRequest(RequestKind::kExplain, "RESOURCE_EXHAUSTED", 0.001);
  const auto families = registry_->Collect();
  const ClientMetric* predict =
      Find(families, "gatescope_request_duration_seconds", {{"kind", "predict"}});
  const ClientMetric* explain =
      Find(families, "gatescope_request_duration_seconds", {{"kind", "explain"}});
  ASSERT_NE(predict, nullptr);
  ASSERT_NE(explain, nullptr);
  EXPECT_EQ(predict->histogram.sample_count, 2u);
  EXPECT_DOUBLE_EQ(predict->histogram.sample_sum, 0.01);
  EXPECT_EQ(explain->histogram.sample_count, 2u);
  EXPECT_DOUBLE_EQ(explain->histogram.sample_sum, 0.301);
  auto requests = [&](const char* kind, const char* code) {
    const ClientMetric* c = Find(families, "gatescope_requests_total",
                                 {{"model", "m"}, {"kind", kind}, {"code", code}});
    return c == nullptr ? -1.0 : c->counter.value;
  };
  EXPECT_EQ(requests("predict", "OK"), 2.0);
  EXPECT_EQ(requests("explain", "OK"), 1.0);
  EXPECT_EQ(requests("explain", "RESOURCE_EXHAUSTED"), 1.0);
  EXPECT_EQ(requests("predict", "RESOURCE_EXHAUSTED"), -1.0);  // never seen: no series
}

TEST_F(ServerMetricsTest, EveryCounterEndsInTotalInTheExposition) {
  ModelMetrics* m = metrics_.ForModel("m");
  m->RecordRequest(RequestKind::kPredict, "OK", 0.001);
  m->inferences->Increment(3);
  m->executions->Increment();
  const std::string text = prometheus::TextSerializer().Serialize(registry_->Collect());
  const std::regex type_line("^# TYPE (\\S+) counter$", std::regex::multiline);
  std::vector<std::string> counters;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), type_line);
       it != std::sregex_iterator(); ++it) {
    counters.push_back((*it)[1]);
  }
  EXPECT_EQ(counters, (std::vector<std::string>{"gatescope_requests_total",
                                                "gatescope_inferences_total",
                                                "gatescope_executions_total"}));
  EXPECT_NE(text.find("gatescope_inferences_total{model=\"m\"} 3"), std::string::npos) << text;
  EXPECT_NE(text.find("gatescope_executions_total{model=\"m\"} 1"), std::string::npos) << text;
}

TEST_F(ServerMetricsTest, ReferencesAreExportedAndReplaced) {
  ModelMetrics* m = metrics_.ForModel("m");
  ASSERT_TRUE(m->SetReferences({{"gate_mean", {0.54068, 0.5168}, {0.03201, 0.0214}},
                                {"plug_scale_mean", {0.91379}, {0.00836}}})
                  .ok());
  auto gauge = [&](const char* family, const char* statistic, const char* layer) {
    const auto families = registry_->Collect();
    const ClientMetric* g =
        Find(families, family, {{"model", "m"}, {"statistic", statistic}, {"layer", layer}});
    return g == nullptr ? -1.0 : g->gauge.value;
  };
  EXPECT_EQ(gauge("gatescope_reference_mean", "gate_mean", "0"), 0.54068);
  EXPECT_EQ(gauge("gatescope_reference_mean", "gate_mean", "1"), 0.5168);
  EXPECT_EQ(gauge("gatescope_reference_stddev", "gate_mean", "1"), 0.0214);
  EXPECT_EQ(gauge("gatescope_reference_mean", "plug_scale_mean", "0"), 0.91379);
  // A reload whose card has fewer layers leaves no stale series.
  ASSERT_TRUE(m->SetReferences({{"gate_mean", {0.5}, {0.01}}}).ok());
  EXPECT_EQ(gauge("gatescope_reference_mean", "gate_mean", "0"), 0.5);
  EXPECT_EQ(gauge("gatescope_reference_mean", "gate_mean", "1"), -1.0);
  EXPECT_EQ(gauge("gatescope_reference_stddev", "plug_scale_mean", "0"), -1.0);
}

TEST_F(ServerMetricsTest, BadReferencesChangeNothing) {
  ModelMetrics* m = metrics_.ForModel("m");
  ASSERT_TRUE(m->SetReferences({{"gate_mean", {0.5}, {0.01}}}).ok());
  for (const StatisticReference& bad :
       {StatisticReference{"no_such_statistic", {0.5}, {0.01}},
        StatisticReference{"gate_mean", {0.5, 0.6}, {0.01}},
        StatisticReference{"gate_mean", {std::numeric_limits<double>::quiet_NaN()}, {0.01}}}) {
    EXPECT_EQ(m->SetReferences({bad}).code(), absl::StatusCode::kInvalidArgument) << bad.family;
  }
  EXPECT_EQ(m->SetReferences({{"gate_mean", {0.1}, {0.01}}, {"gate_mean", {0.2}, {0.01}}}).code(),
            absl::StatusCode::kInvalidArgument);
  const auto families = registry_->Collect();
  const ClientMetric* kept =
      Find(families, "gatescope_reference_mean", {{"statistic", "gate_mean"}, {"layer", "0"}});
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->gauge.value, 0.5);
}

TEST_F(ServerMetricsTest, ConcurrentObservationsAllCount) {
  ModelMetrics* m = metrics_.ForModel("m");
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([m, t] {
      for (int i = 0; i < kEach; ++i) {
        m->ObserveLayerStatistic("gate_mean", i % 4, 0.5);
        m->RecordRequest(t % 2 ? RequestKind::kExplain : RequestKind::kPredict, "OK", 0.001);
        if (i % 100 == 0) m->SetReferences({{"gate_mean", {0.5}, {0.01}}}).IgnoreError();
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto families = registry_->Collect();
  uint64_t observed = 0;
  for (int layer = 0; layer < 4; ++layer) {
    observed += Find(families, "gatescope_gate_mean", {{"layer", std::to_string(layer)}})
                    ->histogram.sample_count;
  }
  EXPECT_EQ(observed, uint64_t{kThreads} * kEach);
  EXPECT_EQ(Find(families, "gatescope_requests_total", {{"kind", "predict"}})->counter.value,
            kThreads / 2 * kEach);
}

}  // namespace
}  // namespace gatescope
