#include "server/repository/metrics_observer.h"

#include <ATen/core/Tensor.h>

#include <cmath>

namespace gatescope {

void MetricsObserver::Executed(int batch_size, absl::Duration input, absl::Duration infer,
                               absl::Duration output) {
  m_->batch_size->Observe(batch_size);
  m_->inferences->Increment(batch_size);
  m_->executions->Increment();
  m_->compute_input_seconds->Observe(absl::ToDoubleSeconds(input));
  m_->compute_infer_seconds->Observe(absl::ToDoubleSeconds(infer));
  m_->compute_output_seconds->Observe(absl::ToDoubleSeconds(output));
  statistics_.Executed(batch_size, input, infer, output);
}

void MetricsObserver::Outputs(const NamedTensors& outputs) {
  for (const LayerStatistic& statistic : LayerStatistics()) {
    const std::string_view name = statistic.output;
    auto it = outputs.find(std::string(name));
    if (it == outputs.end() || it->second.dim() != 2) continue;
    const at::Tensor values = it->second.to(at::kDouble).contiguous();
    const double* v = values.data_ptr<double>();
    const int64_t layers = values.size(1);
    for (int64_t i = 0; i < values.numel(); ++i) {
      // A NaN or infinity would stay in the histogram's sum for the life of the process
      // and blind every drift rule on it; such examples are left out.
      if (!std::isfinite(v[i])) continue;
      m_->ObserveLayerStatistic(name, static_cast<int>(i % layers), v[i]);
    }
  }
}

}  // namespace gatescope
