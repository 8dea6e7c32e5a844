#include "client/perf/load_stats.h"

#include <gtest/gtest.h>

namespace gatescope::perf {
namespace {

TEST(LoadStatsTest, PercentilesAreNearestRank) {
  std::vector<int64_t> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 50), 50);
  EXPECT_EQ(Percentile(v, 99), 99);
  EXPECT_EQ(Percentile(v, 100), 100);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_EQ(Percentile({}, 50), 0);
}

TEST(LoadStatsTest, SummaryCountsOnlyItsWindow) {
  std::vector<Sample> s = {{100, 10, "OK"},  {999, 30, "OK"}, {1000, 20, "OK"},
                           {1500, 40, "OK"}, {1600, 1, "RESOURCE_EXHAUSTED"},
                           {2000, 99, "OK"}};
  const WindowStats w = Summarise(s, 1000, 2000);
  EXPECT_EQ(w.ok, 2);
  EXPECT_DOUBLE_EQ(w.seconds, 0.001);
  EXPECT_DOUBLE_EQ(w.throughput, 2000.0);
  EXPECT_DOUBLE_EQ(w.avg_us, 30.0);
  EXPECT_DOUBLE_EQ(w.p50_us, 20.0);
  EXPECT_DOUBLE_EQ(w.p99_us, 40.0);
  ASSERT_EQ(w.errors.size(), 1u);
  EXPECT_EQ(w.errors.at("RESOURCE_EXHAUSTED"), 1);
}

TEST(LoadStatsTest, StabilityNeedsThreeAgreeingWindows) {
  auto win = [](double tput, double avg) {
    WindowStats w;
    w.throughput = tput;
    w.avg_us = avg;
    return w;
  };
  std::vector<WindowStats> ws = {win(50, 900), win(100, 500), win(104, 510)};
  EXPECT_FALSE(IsStable(ws, 3, 0.1));  // the first window is off
  ws.push_back(win(98, 495));
  EXPECT_TRUE(IsStable(ws, 3, 0.1));
  ws.push_back(win(98, 700));  // latency jumps
  EXPECT_FALSE(IsStable(ws, 3, 0.1));
  EXPECT_FALSE(IsStable({win(1, 1)}, 3, 0.1));
}

}  // namespace
}  // namespace gatescope::perf
