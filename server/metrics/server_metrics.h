// Prometheus metrics of the server. One registry is injected; no static singletons.
#pragma once

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
  prometheus::Histogram* request_seconds = nullptr;    // arrival to response, all outcomes
  prometheus::Histogram* inference_seconds = nullptr;  // one runner call
  prometheus::Histogram* batch_size = nullptr;
  prometheus::Gauge* ready = nullptr;
  // Counts a finished request under its status code name (e.g. "OK", "INVALID_ARGUMENT").
  void CountRequest(const std::string& code);

  prometheus::Family<prometheus::Counter>* requests = nullptr;
  std::string model;
  absl::Mutex mu;
  std::map<std::string, prometheus::Counter*> by_code ABSL_GUARDED_BY(mu);
};

class ServerMetrics {
 public:
  explicit ServerMetrics(std::shared_ptr<prometheus::Registry> registry);

  // Returns the (cached) series of `model`. Thread-safe; the pointer lives as long as this.
  ModelMetrics* ForModel(const std::string& model);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_seconds_;
  prometheus::Family<prometheus::Histogram>& inference_seconds_;
  prometheus::Family<prometheus::Histogram>& batch_size_;
  prometheus::Family<prometheus::Gauge>& ready_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<ModelMetrics>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope
