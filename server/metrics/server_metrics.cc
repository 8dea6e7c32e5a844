#include "server/metrics/server_metrics.h"

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

}  // namespace

void ModelMetrics::CountRequest(const std::string& code) {
  absl::MutexLock lock(&mu);
  auto it = by_code.find(code);
  if (it == by_code.end()) {
    it = by_code.emplace(code, &requests->Add({{"model", model}, {"code", code}})).first;
  }
  it->second->Increment();
}

ServerMetrics::ServerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      requests_(prometheus::BuildCounter()
                    .Name("gatescope_requests_total")
                    .Help("Finished requests by model and gRPC status code")
                    .Register(*registry_)),
      request_seconds_(prometheus::BuildHistogram()
                           .Name("gatescope_request_duration_seconds")
                           .Help("Time from request arrival to response, by model")
                           .Register(*registry_)),
      inference_seconds_(prometheus::BuildHistogram()
                             .Name("gatescope_inference_duration_seconds")
                             .Help("Time of one batched model execution, by model")
                             .Register(*registry_)),
      batch_size_(prometheus::BuildHistogram()
                      .Name("gatescope_batch_size")
                      .Help("Examples per model execution")
                      .Register(*registry_)),
      ready_(prometheus::BuildGauge()
                 .Name("gatescope_model_ready")
                 .Help("1 when the model is loaded and serving")
                 .Register(*registry_)) {}

ModelMetrics* ServerMetrics::ForModel(const std::string& model) {
  absl::MutexLock lock(&mu_);
  auto& slot = models_[model];
  if (!slot) {
    slot = std::make_unique<ModelMetrics>();
    const prometheus::Labels labels{{"model", model}};
    slot->model = model;
    slot->requests = &requests_;
    slot->request_seconds = &request_seconds_.Add(labels, LatencyBuckets());
    slot->inference_seconds = &inference_seconds_.Add(labels, LatencyBuckets());
    slot->batch_size = &batch_size_.Add(labels, BatchBuckets());
    slot->ready = &ready_.Add(labels);
  }
  return slot.get();
}

}  // namespace gatescope
