#include "server/metrics/server_metrics.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"

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

// The per-layer statistics and their bucket ranges. Buckets are 0.01 wide: the shifts that
// matter are a few hundredths (docs/benchmarks.md: noise that costs DGViT 18 accuracy
// points moves its first layer's gate mean 0.541 -> 0.530, stronger noise to 0.521; the
// served per-example spread is 0.01-0.03), so a 0.02 shift moves the distribution by two
// buckets and shows in bucket counts and histogram_quantile, where 0.05-wide buckets held
// 0.54 and 0.52 in the same bucket. Finer buckets would multiply the series (one per bucket,
// model and layer) for resolution no rule reads: the drift alerts use _sum / _count, which
// are exact at any width. Each range is what the statistic can take:
static constexpr LayerStatistic kLayerStatistics[] = {
    // M-DGSA gates are sigmoids: [0, 1].
    {"gate_mean", "gate_mean",
     "Per served example: mean M-DGSA gate of one layer (heads, tokens)", 0, 100},
    // A fraction of query-key pairs: [0, 1].
    {"vigilance_mean", "vigilance_crossing",
     "Per served example: DAR fraction of query-key pairs with cosine above the vigilance, "
     "one layer (mean over heads)",
     0, 100},
    // PLuG's logit scale 1 + G: PLuG-DeiT's G = tanh(gA gB) puts it in [0, 2]; PLuG
    // Deformable DETR's G = gA gB has no tanh (served layer means 1.005-1.54, elementwise
    // 0.8-2.9), and a mean above 2 falls in +Inf. Not G itself: G is signed, and a
    // histogram whose _sum can fall breaks rate(), which the drift rules read.
    {"plug_scale_mean", "plug_scale_mean",
     "Per served example: mean PLuG logit scale 1 + G of one layer (query-key pairs; "
     "detectors: heads, levels and queries)",
     0, 200},
    // GDLA gates are sigmoids: [0, 1]. One "layer" per decoder stage, coarse to fine.
    {"gdla_gate_mean", "gdla_gate_mean",
     "Per served example: mean GDLA gate of one decoder stage (layer label; paths, heads, "
     "tokens, channels)",
     0, 100},
};

}  // namespace

std::string_view RequestKindName(RequestKind kind) {
  switch (kind) {
    case RequestKind::kPredict:
      return "predict";
    case RequestKind::kExplain:
      return "explain";
  }
  return "predict";
}

absl::Span<const LayerStatistic> LayerStatistics() { return kLayerStatistics; }

const LayerStatistic* FindLayerStatistic(std::string_view family) {
  for (const LayerStatistic& s : kLayerStatistics) {
    if (s.family == family) return &s;
  }
  return nullptr;
}

prometheus::Histogram::BucketBoundaries StatisticBuckets(const LayerStatistic& statistic) {
  prometheus::Histogram::BucketBoundaries bounds;
  for (int h = statistic.lowest_hundredths + 1; h <= statistic.highest_hundredths; ++h) {
    bounds.push_back(h / 100.0);
  }
  return bounds;
}

void ModelMetrics::ObserveLayerStatistic(std::string_view output, int layer, double value) {
  auto found = layer_statistics.find(output);  // read-only after ForModel: no lock
  if (found == layer_statistics.end()) return;
  const StatisticFamily& f = found->second;
  prometheus::Histogram* series = nullptr;
  {
    absl::MutexLock lock(&mu);
    auto& slot = layer_series[{f.statistic, layer}];
    if (slot == nullptr) {
      slot = &f.family->Add({{"model", model}, {"layer", std::to_string(layer)}},
                            StatisticBuckets(*f.statistic));
    }
    series = slot;
  }
  series->Observe(value);
}

void ModelMetrics::RecordRequest(RequestKind kind, const std::string& code, double seconds) {
  request_seconds[static_cast<int>(kind)]->Observe(seconds);
  absl::MutexLock lock(&mu);
  auto it = by_code.find({kind, code});
  if (it == by_code.end()) {
    prometheus::Counter& counter = requests->Add(
        {{"model", model}, {"code", code}, {"kind", std::string(RequestKindName(kind))}});
    it = by_code.emplace(std::make_pair(kind, code), &counter).first;
  }
  it->second->Increment();
}

namespace {

// INVALID_ARGUMENT unless `reference` names a served statistic and has one finite mean and
// stddev per layer.
absl::Status CheckReference(const StatisticReference& reference) {
  if (FindLayerStatistic(reference.family) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no served statistic is named '", reference.family, "'"));
  }
  if (reference.mean.size() != reference.stddev.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        reference.family, ": ", reference.mean.size(), " means but ", reference.stddev.size(),
        " standard deviations"));
  }
  for (size_t i = 0; i < reference.mean.size(); ++i) {
    if (!std::isfinite(reference.mean[i]) || !std::isfinite(reference.stddev[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(reference.family, ": layer ", i, " is not finite"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ModelMetrics::SetReferences(const std::vector<StatisticReference>& references) {
  std::set<std::string_view> families;
  for (const StatisticReference& r : references) {
    if (absl::Status st = CheckReference(r); !st.ok()) return st;
    if (!families.insert(r.family).second) {
      return absl::InvalidArgumentError(absl::StrCat(r.family, " is given twice"));
    }
  }
  absl::MutexLock lock(&mu);
  for (prometheus::Gauge* gauge : reference_means) reference_mean->Remove(gauge);
  for (prometheus::Gauge* gauge : reference_stddevs) reference_stddev->Remove(gauge);
  reference_means.clear();
  reference_stddevs.clear();
  for (const StatisticReference& r : references) {
    for (size_t layer = 0; layer < r.mean.size(); ++layer) {
      const prometheus::Labels labels{
          {"model", model}, {"statistic", r.family}, {"layer", std::to_string(layer)}};
      prometheus::Gauge& mean = reference_mean->Add(labels);
      prometheus::Gauge& stddev = reference_stddev->Add(labels);
      mean.Set(r.mean[layer]);
      stddev.Set(r.stddev[layer]);
      reference_means.push_back(&mean);
      reference_stddevs.push_back(&stddev);
    }
  }
  return absl::OkStatus();
}

namespace {

// The families, each "gatescope_<name>" with one series per model (label "model").
constexpr std::pair<const char*, const char*> kLatencies[] = {
    {"request_duration_seconds",
     "Time from request arrival to response, by model and kind (predict, explain)"},
    {"queue_duration_seconds", "Time a request waited in the model queue"},
    {"compute_input_duration_seconds", "Time preparing the inputs of one execution"},
    {"compute_infer_duration_seconds", "Time of one batched model execution"},
    {"compute_output_duration_seconds", "Time delivering the outputs of one execution"},
};
constexpr std::pair<const char*, const char*> kHistograms[] = {
    {"batch_size", "Requests per model execution"},
};
// prometheus-cpp 1.0 writes a counter's name as registered (no "_total" appended), so the
// names carry the suffix the Prometheus conventions ask of counters.
constexpr std::pair<const char*, const char*> kCounters[] = {
    {"requests_total", "Finished requests by model, kind (predict, explain) and gRPC status code"},
    {"inferences_total", "Requests executed (each batch member counts)"},
    {"executions_total", "Model executions (runner calls)"},
};
constexpr std::pair<const char*, const char*> kGauges[] = {
    {"pending_requests", "Requests waiting in the queue"},
    {"queue_capacity",
     "Waiting requests the queue holds before it refuses (sum over priority levels; 0: no cap)"},
    {"model_ready", "1 when the model is loaded and serving"},
    {"reference_mean",
     "Model card's reference: mean of a served per-layer statistic over the card's held-out "
     "data (labels model, statistic: the histogram's name without gatescope_, layer)"},
    {"reference_stddev",
     "Model card's reference: per-example standard deviation of a served per-layer statistic "
     "over the card's held-out data"},
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
  for (const LayerStatistic& s : LayerStatistics()) {
    statistics_[std::string(s.family)] = &prometheus::BuildHistogram()
                                              .Name(std::string("gatescope_").append(s.family))
                                              .Help(std::string(s.help))
                                              .Register(*registry_);
  }
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
    // Both kinds exist from the start, so a rate over either reads 0 rather than nothing.
    for (RequestKind kind : {RequestKind::kPredict, RequestKind::kExplain}) {
      slot->request_seconds[static_cast<int>(kind)] =
          &latencies_.at("request_duration_seconds")
               ->Add({{"model", model}, {"kind", std::string(RequestKindName(kind))}},
                     LatencyBuckets());
    }
    slot->requests = counters_.at("requests_total");
    slot->queue_seconds = latency("queue_duration_seconds");
    slot->compute_input_seconds = latency("compute_input_duration_seconds");
    slot->compute_infer_seconds = latency("compute_infer_duration_seconds");
    slot->compute_output_seconds = latency("compute_output_duration_seconds");
    slot->batch_size = &histograms_.at("batch_size")->Add(labels, BatchBuckets());
    slot->inferences = &counters_.at("inferences_total")->Add(labels);
    slot->executions = &counters_.at("executions_total")->Add(labels);
    slot->pending = &gauges_.at("pending_requests")->Add(labels);
    slot->queue_capacity = &gauges_.at("queue_capacity")->Add(labels);
    slot->ready = &gauges_.at("model_ready")->Add(labels);
    slot->reference_mean = gauges_.at("reference_mean");
    slot->reference_stddev = gauges_.at("reference_stddev");
    for (const LayerStatistic& s : LayerStatistics()) {
      slot->layer_statistics[std::string(s.output)] = {&s, statistics_.find(s.family)->second};
    }
  }
  return slot.get();
}

}  // namespace gatescope
