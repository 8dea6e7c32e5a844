// Feeds a model's scheduler reports into its Prometheus series.
#pragma once

#include <ATen/ATen.h>

#include "server/batching/scheduler_observer.h"
#include "server/metrics/server_metrics.h"

namespace gatescope {

class MetricsObserver : public SchedulerObserver {
 public:
  // `metrics` is not owned and must outlive this.
  explicit MetricsObserver(ModelMetrics* metrics) : m_(metrics) {}

  void QueueDepth(int depth) override { m_->pending->Set(depth); }
  void Dequeued(absl::Duration waited) override {
    m_->queue_seconds->Observe(absl::ToDoubleSeconds(waited));
  }
  void Executed(int batch_size, absl::Duration input, absl::Duration infer,
                absl::Duration output) override {
    m_->batch_size->Observe(batch_size);
    m_->inference_count->Increment(batch_size);
    m_->execution_count->Increment();
    m_->compute_input_seconds->Observe(absl::ToDoubleSeconds(input));
    m_->compute_infer_seconds->Observe(absl::ToDoubleSeconds(infer));
    m_->compute_output_seconds->Observe(absl::ToDoubleSeconds(output));
  }
  // Per-layer statistics outputs [B, L] ("gate_mean", "vigilance_mean"), one value per example.
  void Outputs(const NamedTensors& outputs) override {
    for (const char* name : {"gate_mean", "vigilance_mean"}) {
      auto it = outputs.find(name);
      if (it == outputs.end() || it->second.dim() != 2) continue;
      const at::Tensor values = it->second.to(at::kDouble).contiguous();
      const double* v = values.data_ptr<double>();
      const int64_t layers = values.size(1);
      for (int64_t i = 0; i < values.numel(); ++i) {
        m_->ObserveLayerStatistic(name, static_cast<int>(i % layers), v[i]);
      }
    }
  }

 private:
  ModelMetrics* const m_;
};

}  // namespace gatescope
