// Keeps one example's per-stage maps of a segmentation model's explanation pass: each
// decoder stage s returns [h_s, w_s] maps ("gate", "attention": the query pixel's
// attention) on its own token grid. Pure ATen; one collector per request, used from one
// thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/explain/map_collector.h"

namespace gatescope {

// What a segmentation model's metadata declares about its maps.
struct DenseMapLayout {
  int stages = 0;                 // decoder stages (ModelConfig.layers)
  bool has_attention = false;     // "attention" in maps: the model can explain
  bool has_gate = false;          // "gate" in maps
  int64_t height = 0, width = 0;  // model input size [H, W]
};

struct DenseMapOptions {
  bool gates = false;            // keep every stage's "gate" map
  bool query_attention = false;  // keep every stage's "attention" map
};

struct DenseMaps {
  std::vector<at::Tensor> gates;            // per stage, float32 [h_s, w_s], if asked
  std::vector<at::Tensor> query_attention;  // per stage, float32 [h_s, w_s], if asked
};

class DenseMapCollector final : public MapCollector {
 public:
  // INVALID_ARGUMENT when the model cannot serve the options (no stages or no attention
  // maps: it cannot explain; gates of a model without gate maps).
  static absl::StatusOr<std::unique_ptr<DenseMapCollector>> Create(const DenseMapLayout& layout,
                                                                   const DenseMapOptions& options,
                                                                   int64_t max_bytes);

  // Assuming (the model contract) no stage's grid is finer than [H/4, W/4] of the model's
  // input size (inputs are resized to it, so `input` is not used): one stage's maps as
  // the model returns them plus every kept map.
  int64_t PeakBytes(ImageSize input) const override;

  // After every stage was added (INTERNAL otherwise).
  absl::StatusOr<DenseMaps> Finish();

 private:
  DenseMapCollector(const DenseMapLayout& layout, const DenseMapOptions& options, int64_t max_bytes)
      : MapCollector(layout.stages, max_bytes), layout_(layout), options_(options) {}
  // Stage `stage`'s maps; INTERNAL when a needed one is missing or not 2-D.
  absl::Status Collect(int stage, const NamedTensors& maps) override;
  absl::Status KeepMap(const NamedTensors& maps, const char* kind, std::vector<at::Tensor>& into);

  DenseMapLayout layout_;
  DenseMapOptions options_;
  DenseMaps out_;
};

}  // namespace gatescope
