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
#include "server/runtime/model_runner.h"

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

class DenseMapCollector {
 public:
  // INVALID_ARGUMENT when the model cannot serve the options (no stages or no attention
  // maps: it cannot explain; gates of a model without gate maps). RESOURCE_EXHAUSTED when
  // PeakBytes() exceeds `max_bytes`.
  static absl::StatusOr<std::unique_ptr<DenseMapCollector>> Create(const DenseMapLayout& layout,
                                                                   const DenseMapOptions& options,
                                                                   int64_t max_bytes);

  // Upper bound of the map bytes the request holds at once, assuming (the model contract)
  // no stage's grid is finer than [H/4, W/4]: one stage's maps as the model returns them
  // plus every kept map. AddStage enforces `max_bytes` on the maps actually kept.
  int64_t PeakBytes() const;

  // Stage `stage`'s maps of one example (batch dim removed), stages in order 0..stages-1.
  // INTERNAL when a needed map is missing or not 2-D; RESOURCE_EXHAUSTED when the kept
  // maps pass `max_bytes`.
  absl::Status AddStage(int stage, const NamedTensors& maps);

  // After every stage was added (INTERNAL otherwise).
  absl::StatusOr<DenseMaps> Finish();

 private:
  DenseMapCollector(const DenseMapLayout& layout, const DenseMapOptions& options, int64_t max_bytes)
      : layout_(layout), options_(options), max_bytes_(max_bytes) {}
  absl::Status Keep(const NamedTensors& maps, const char* kind, std::vector<at::Tensor>& into);

  DenseMapLayout layout_;
  DenseMapOptions options_;
  int64_t max_bytes_;
  int next_stage_ = 0;
  int64_t kept_bytes_ = 0;
  DenseMaps out_;
};

}  // namespace gatescope
