// Feeds a model's queue and execution reports into its Prometheus series, so batching
// stays metrics-free and metrics stays batching-free.
#pragma once

#include "server/batching/queue_observer.h"
#include "server/metrics/server_metrics.h"
#include "server/tasks/execution_observer.h"

namespace gatescope {

class MetricsObserver final : public QueueObserver, public ExecutionObserver {
 public:
  // `metrics` is not owned and must outlive this.
  explicit MetricsObserver(ModelMetrics* metrics) : m_(metrics) {}

  void QueueDepth(int depth) override { m_->pending->Set(depth); }
  void Dequeued(absl::Duration waited) override {
    m_->queue_seconds->Observe(absl::ToDoubleSeconds(waited));
  }
  void Executed(int batch_size, absl::Duration input, absl::Duration infer,
                absl::Duration output) override;
  // Per-layer statistics outputs [B, L] ("gate_mean", "vigilance_mean"), one value per
  // example; non-finite values are not observed.
  void Outputs(const NamedTensors& outputs) override;

 private:
  ModelMetrics* const m_;
};

}  // namespace gatescope
