// Latency/throughput bookkeeping of the load generator. Pure and tested.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gatescope::perf {

// One finished request: when it completed (µs since the run's start), how long it took,
// and its outcome ("OK" or a gRPC code name).
struct Sample {
  int64_t end_us = 0;
  int64_t latency_us = 0;
  std::string outcome;
};

struct WindowStats {
  double seconds = 0;
  int64_t ok = 0;
  std::map<std::string, int64_t> errors;  // by code name
  double throughput = 0;                  // successful requests per second
  double avg_us = 0, p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0;
};

// Nearest-rank percentile of sorted values (q in (0, 100]).
inline double Percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q / 100.0 * sorted.size()));
  return static_cast<double>(sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1]);
}

// Statistics of the samples that completed in [begin_us, end_us).
inline WindowStats Summarise(const std::vector<Sample>& samples, int64_t begin_us,
                             int64_t end_us) {
  WindowStats w;
  w.seconds = (end_us - begin_us) / 1e6;
  std::vector<int64_t> lat;
  for (const Sample& s : samples) {
    if (s.end_us < begin_us || s.end_us >= end_us) continue;
    if (s.outcome == "OK") {
      lat.push_back(s.latency_us);
    } else {
      ++w.errors[s.outcome];
    }
  }
  std::sort(lat.begin(), lat.end());
  w.ok = static_cast<int64_t>(lat.size());
  w.throughput = w.seconds > 0 ? w.ok / w.seconds : 0;
  if (!lat.empty()) {
    double sum = 0;
    for (int64_t v : lat) sum += static_cast<double>(v);
    w.avg_us = sum / lat.size();
    w.p50_us = Percentile(lat, 50);
    w.p90_us = Percentile(lat, 90);
    w.p95_us = Percentile(lat, 95);
    w.p99_us = Percentile(lat, 99);
  }
  return w;
}

// True when the last `count` windows' throughput and average latency each stay within
// ±stability (a fraction) of their mean, as perf_analyzer judges a measurement stable.
inline bool IsStable(const std::vector<WindowStats>& windows, size_t count, double stability) {
  if (windows.size() < count || count == 0) return false;
  auto within = [&](auto get) {
    double mean = 0;
    for (size_t i = windows.size() - count; i < windows.size(); ++i) mean += get(windows[i]);
    mean /= count;
    if (mean <= 0) return false;
    for (size_t i = windows.size() - count; i < windows.size(); ++i) {
      if (std::fabs(get(windows[i]) - mean) > stability * mean) return false;
    }
    return true;
  };
  return within([](const WindowStats& w) { return w.throughput; }) &&
         within([](const WindowStats& w) { return w.avg_us; });
}

}  // namespace gatescope::perf
