#include "server/metrics/server_metrics.h"

#include <unistd.h>

#include <cstdio>

#include "absl/time/clock.h"

namespace gatescope {
namespace {

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10};
  return *buckets;
}

const prometheus::Histogram::BucketBoundaries& BatchBuckets() {
  static const auto* buckets =
      new prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128};
  return *buckets;
}

// Fractions in [0, 1], in steps of 0.05.
const prometheus::Histogram::BucketBoundaries& FractionBuckets() {
  static const auto* buckets = [] {
    auto* b = new prometheus::Histogram::BucketBoundaries;
    for (int i = 1; i <= 20; ++i) b->push_back(0.05 * i);
    return b;
  }();
  return *buckets;
}

}  // namespace

void ModelMetrics::ObserveLayerStatistic(const std::string& name, int layer, double value) {
  auto family = layer_statistics.find(name);
  if (family == layer_statistics.end()) return;
  prometheus::Histogram* series = nullptr;
  {
    absl::MutexLock lock(&mu);
    auto& slot = layer_series[{name, layer}];
    if (slot == nullptr) {
      slot = &family->second->Add({{"model", model}, {"layer", std::to_string(layer)}},
                                  FractionBuckets());
    }
    series = slot;
  }
  series->Observe(value);
}

void ModelMetrics::RecordRequest(const std::string& code, double seconds) {
  request_seconds->Observe(seconds);
  absl::MutexLock lock(&mu);
  auto it = by_code.find(code);
  if (it == by_code.end()) {
    it = by_code.emplace(code, &requests->Add({{"model", model}, {"code", code}})).first;
  }
  it->second->Increment();
}

namespace {

// The families, each "gatescope_<name>" with one series per model (label "model").
constexpr std::pair<const char*, const char*> kLatencies[] = {
    {"request_duration_seconds", "Time from request arrival to response, by model"},
    {"queue_duration_seconds", "Time a request waited in the model queue"},
    {"compute_input_duration_seconds", "Time preparing the inputs of one execution"},
    {"compute_infer_duration_seconds", "Time of one batched model execution"},
    {"compute_output_duration_seconds", "Time delivering the outputs of one execution"},
};
constexpr std::pair<const char*, const char*> kHistograms[] = {
    {"batch_size", "Requests per model execution"},
    {"gate_mean", "Per served example: mean M-DGSA gate of one layer (heads, tokens)"},
    {"vigilance_crossing",
     "Per served example: DAR fraction of query-key pairs with cosine above the vigilance, "
     "one layer (mean over heads)"},
};
constexpr std::pair<const char*, const char*> kCounters[] = {
    {"requests_total", "Finished requests by model and gRPC status code"},
    {"inference_count", "Requests executed (each batch member counts)"},
    {"execution_count", "Model executions (runner calls)"},
};
constexpr std::pair<const char*, const char*> kGauges[] = {
    {"pending_requests", "Requests waiting in the queue"},
    {"queue_capacity",
     "Waiting requests the queue holds before it refuses (sum over priority levels; 0: no cap)"},
    {"model_ready", "1 when the model is loaded and serving"},
};

template <typename Builder, typename Specs, typename Families>
void Register(Builder build, const Specs& specs, prometheus::Registry& registry, Families& into) {
  for (const auto& [name, help] : specs) {
    into[name] = &build().Name(std::string("gatescope_") + name).Help(help).Register(registry);
  }
}

}  // namespace

ServerMetrics::ServerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      resident_memory_(prometheus::BuildGauge()
                           .Name("gatescope_process_resident_memory_bytes")
                           .Help("Resident memory of the server process")
                           .Register(*registry_)
                           .Add({})) {
  Register(prometheus::BuildHistogram, kLatencies, *registry_, latencies_);
  Register(prometheus::BuildHistogram, kHistograms, *registry_, histograms_);
  Register(prometheus::BuildCounter, kCounters, *registry_, counters_);
  Register(prometheus::BuildGauge, kGauges, *registry_, gauges_);
}

void ServerMetrics::RefreshProcessGauges() {
  long pages_total = 0, pages_resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) == 2) {
      resident_memory_.Set(static_cast<double>(pages_resident) * sysconf(_SC_PAGESIZE));
    }
    std::fclose(f);
  }
}

ModelMetrics* ServerMetrics::ForModel(const std::string& model) {
  absl::MutexLock lock(&mu_);
  auto& slot = models_[model];
  if (!slot) {
    slot = std::make_unique<ModelMetrics>();
    const prometheus::Labels labels{{"model", model}};
    slot->model = model;
    auto latency = [&](const char* name) {
      return &latencies_.at(name)->Add(labels, LatencyBuckets());
    };
    slot->requests = counters_.at("requests_total");
    slot->request_seconds = latency("request_duration_seconds");
    slot->queue_seconds = latency("queue_duration_seconds");
    slot->compute_input_seconds = latency("compute_input_duration_seconds");
    slot->compute_infer_seconds = latency("compute_infer_duration_seconds");
    slot->compute_output_seconds = latency("compute_output_duration_seconds");
    slot->batch_size = &histograms_.at("batch_size")->Add(labels, BatchBuckets());
    slot->inference_count = &counters_.at("inference_count")->Add(labels);
    slot->execution_count = &counters_.at("execution_count")->Add(labels);
    slot->pending = &gauges_.at("pending_requests")->Add(labels);
    slot->queue_capacity = &gauges_.at("queue_capacity")->Add(labels);
    slot->ready = &gauges_.at("model_ready")->Add(labels);
    slot->layer_statistics = {{"gate_mean", histograms_.at("gate_mean")},
                              {"vigilance_mean", histograms_.at("vigilance_crossing")}};
  }
  return slot.get();
}

}  // namespace gatescope
