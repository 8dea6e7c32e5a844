// Prometheus metrics of the server. One registry is injected; no static singletons.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace gatescope {

// What a finished request asked for: the `kind` label of its latency and outcome series.
enum class RequestKind {
  kPredict,  // gatescope.v1 Predict; KServe ModelInfer (gRPC, REST, ModelStreamInfer)
  kExplain,  // gatescope.v1 Explain (gRPC and REST)
};
inline constexpr int kRequestKinds = 2;
// The label value: "predict" or "explain".
std::string_view RequestKindName(RequestKind kind);

// A per-layer statistic of served predictions: a model output [B, L] observed once per
// example and layer in the histogram family gatescope_<family>{model,layer}.
struct LayerStatistic {
  std::string_view output;  // the model output, e.g. "gate_mean"
  // The histogram's name without "gatescope_", and the `statistic` label of the model card's
  // reference series (gatescope_reference_mean, gatescope_reference_stddev).
  std::string_view family;
  std::string_view help;
  // Bucket upper bounds run from lowest + 0.01 to highest in steps of 0.01 (values are in
  // hundredths, so every bound is exactly k / 100.0), plus +Inf.
  int lowest_hundredths;
  int highest_hundredths;
};

// Every statistic the server observes (server_metrics.cc says why the buckets are 0.01 wide).
absl::Span<const LayerStatistic> LayerStatistics();
// The statistic whose histogram family is `family` (without "gatescope_"); null if none.
const LayerStatistic* FindLayerStatistic(std::string_view family);
// The upper bounds of a statistic's histogram buckets (+Inf not included).
prometheus::Histogram::BucketBoundaries StatisticBuckets(const LayerStatistic& statistic);

// A model card's reference values of one statistic (its "Monitoring reference"), per layer.
struct StatisticReference {
  std::string family;           // a LayerStatistic's family, e.g. "gate_mean"
  std::vector<double> mean;     // per layer: the mean over the card's held-out data
  std::vector<double> stddev;   // per layer: the per-example standard deviation
};

// Handles of one model's series. Pointers are owned by the registry and stay valid for
// the ServerMetrics' lifetime; prometheus-cpp metrics are thread-safe, and so are the
// methods below (they take `mu`).
struct ModelMetrics {
  prometheus::Histogram* queue_seconds = nullptr;    // per request, waiting for a batch
  prometheus::Histogram* compute_input_seconds = nullptr;   // per execution: decoding inputs
  prometheus::Histogram* compute_infer_seconds = nullptr;   // per execution: the model
  prometheus::Histogram* compute_output_seconds = nullptr;  // per execution: replies
  prometheus::Histogram* batch_size = nullptr;
  prometheus::Counter* inferences = nullptr;  // requests executed (batch members)
  prometheus::Counter* executions = nullptr;  // runner calls
  prometheus::Gauge* pending = nullptr;            // requests waiting in the queue
  prometheus::Gauge* queue_capacity = nullptr;     // waiting requests before refusals; 0: no cap
  prometheus::Gauge* ready = nullptr;

  // Records a finished request of `kind`: counted under its status code name (e.g. "OK",
  // "INVALID_ARGUMENT") and its latency observed, both labelled with the kind.
  void RecordRequest(RequestKind kind, const std::string& code, double seconds);

  // Observes one example's value of a per-layer statistic, by model output name (a
  // LayerStatistic's `output`: "gate_mean", "vigilance_mean", "plug_scale_mean",
  // "gdla_gate_mean"), in its histogram labelled by model and layer. Unknown names are
  // ignored.
  void ObserveLayerStatistic(std::string_view output, int layer, double value);

  // Replaces the model's reference series with `references` (from its card; empty: none).
  // INVALID_ARGUMENT, and nothing changed, for an unknown family, a family given twice, a
  // mean and stddev of different lengths, or a value that is not finite.
  absl::Status SetReferences(const std::vector<StatisticReference>& references);

  // Set once by ServerMetrics::ForModel, read-only afterwards.
  std::string model;
  // Arrival to response, every outcome; indexed by RequestKind.
  std::array<prometheus::Histogram*, kRequestKinds> request_seconds{};
  prometheus::Family<prometheus::Counter>* requests = nullptr;
  struct StatisticFamily {
    const LayerStatistic* statistic;
    prometheus::Family<prometheus::Histogram>* family;
  };
  std::map<std::string, StatisticFamily, std::less<>> layer_statistics;  // by model output
  prometheus::Family<prometheus::Gauge>* reference_mean = nullptr;
  prometheus::Family<prometheus::Gauge>* reference_stddev = nullptr;

  mutable absl::Mutex mu;
  std::map<std::pair<RequestKind, std::string>, prometheus::Counter*> by_code ABSL_GUARDED_BY(mu);
  std::map<std::pair<const LayerStatistic*, int>, prometheus::Histogram*> layer_series
      ABSL_GUARDED_BY(mu);
  // This model's series in reference_mean and reference_stddev.
  std::vector<prometheus::Gauge*> reference_means ABSL_GUARDED_BY(mu);
  std::vector<prometheus::Gauge*> reference_stddevs ABSL_GUARDED_BY(mu);
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
  using Families = std::map<std::string, prometheus::Family<T>*, std::less<>>;

  std::shared_ptr<prometheus::Registry> registry_;
  // By name, without the "gatescope_" prefix (see server_metrics.cc).
  Families<prometheus::Histogram> latencies_;   // seconds, per model
  Families<prometheus::Histogram> histograms_;  // batch size
  Families<prometheus::Histogram> statistics_;  // per-layer statistics, by LayerStatistic family
  Families<prometheus::Counter> counters_;
  Families<prometheus::Gauge> gauges_;
  prometheus::Gauge& resident_memory_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<ModelMetrics>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope
