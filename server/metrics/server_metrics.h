// Prometheus metrics of the server. One registry is injected; no static singletons.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gatescope {

// Handles of one model's series. Pointers are owned by the registry and stay valid for
// the ServerMetrics' lifetime; prometheus-cpp metrics are thread-safe.
struct ModelMetrics {
  prometheus::Histogram* request_seconds = nullptr;  // arrival to response, all outcomes
  prometheus::Histogram* queue_seconds = nullptr;    // per request, waiting for a batch
  prometheus::Histogram* compute_input_seconds = nullptr;   // per execution: decoding inputs
  prometheus::Histogram* compute_infer_seconds = nullptr;   // per execution: the model
  prometheus::Histogram* compute_output_seconds = nullptr;  // per execution: replies
  prometheus::Histogram* batch_size = nullptr;
  prometheus::Counter* inference_count = nullptr;  // requests executed (batch members)
  prometheus::Counter* execution_count = nullptr;  // runner calls
  prometheus::Gauge* pending = nullptr;            // requests waiting in the queue
  prometheus::Gauge* queue_capacity = nullptr;     // waiting requests before refusals; 0: no cap
  prometheus::Gauge* ready = nullptr;
  // Records a finished request: counted under its status code name (e.g. "OK",
  // "INVALID_ARGUMENT") and its latency observed.
  void RecordRequest(const std::string& code, double seconds);

  // Per-layer statistics of served predictions ("gate_mean": the mean M-DGSA gate of a
  // layer; "vigilance_mean": the DAR vigilance-crossing fraction of a layer), one observation
  // per example, in histograms labelled by model and layer. Unknown names are ignored.
  void ObserveLayerStatistic(const std::string& name, int layer, double value);

  prometheus::Family<prometheus::Counter>* requests = nullptr;
  std::map<std::string, prometheus::Family<prometheus::Histogram>*> layer_statistics;
  std::string model;
  mutable absl::Mutex mu;
  std::map<std::string, prometheus::Counter*> by_code ABSL_GUARDED_BY(mu);
  std::map<std::pair<std::string, int>, prometheus::Histogram*> layer_series ABSL_GUARDED_BY(mu);
};

class ServerMetrics {
 public:
  explicit ServerMetrics(std::shared_ptr<prometheus::Registry> registry);

  // Returns the (cached) series of `model`. Thread-safe; the pointer lives as long as this.
  ModelMetrics* ForModel(const std::string& model);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // Refreshes process-wide gauges (resident memory); call before each scrape.
  void RefreshProcessGauges();

 private:
  template <typename T>
  using Families = std::map<std::string, prometheus::Family<T>*>;

  std::shared_ptr<prometheus::Registry> registry_;
  // By name, without the "gatescope_" prefix (see server_metrics.cc).
  Families<prometheus::Histogram> latencies_;  // seconds, per model
  Families<prometheus::Histogram> histograms_;  // batch size, per-layer statistics
  Families<prometheus::Counter> counters_;
  Families<prometheus::Gauge> gauges_;
  prometheus::Gauge& resident_memory_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<ModelMetrics>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope
