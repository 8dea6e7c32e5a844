// Feeds a model version's queue and execution reports into its model's Prometheus series
// and its own statistics (version_statistics.h), so batching stays metrics-free and
// metrics stays batching-free.
#pragma once

#include "server/batching/queue_observer.h"
#include "server/metrics/server_metrics.h"
#include "server/repository/version_statistics.h"
#include "server/tasks/execution_observer.h"

namespace gatescope {

class MetricsObserver final : public QueueObserver, public ExecutionObserver {
 public:
  // `metrics` is not owned and must outlive this.
  explicit MetricsObserver(ModelMetrics* metrics) : m_(metrics) {}

  void QueueDepth(int depth) override { m_->pending->Set(depth); }
  void Dequeued(absl::Duration waited) override {
    m_->queue_seconds->Observe(absl::ToDoubleSeconds(waited));
    statistics_.Dequeued(waited);
  }
  void Executed(int batch_size, absl::Duration input, absl::Duration infer,
                absl::Duration output) override;
  // Per-layer statistics outputs [B, L] (every LayerStatistic's output: "gate_mean",
  // "vigilance_mean", "plug_scale_mean", "gdla_gate_mean"), one value per example and
  // layer; non-finite values are not observed.
  void Outputs(const NamedTensors& outputs) override;

  // This version's statistics; the frontends record each finished call in it.
  VersionStatistics& statistics() { return statistics_; }
  const VersionStatistics& statistics() const { return statistics_; }

 private:
  ModelMetrics* const m_;
  VersionStatistics statistics_;
};

}  // namespace gatescope
