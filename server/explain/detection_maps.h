// Keeps one example's maps of a detection model's explanation pass and, once the
// detections are known, cuts out those of the detected queries: the decoder's sampling
// points (mapped to pixels), attention weights and PLuG gates per decoder layer, and the
// encoder's PLuG gate maps. Pure ATen; one collector per request, used from one thread at
// a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/explain/map_collector.h"
#include "server/postprocess/detection.h"

namespace gatescope {

// What a detection model's metadata declares (ModelConfig.detection, heads, maps).
struct DetectionMapLayout {
  int encoder_layers = 0, decoder_layers = 0;
  int64_t heads = 0, levels = 0, points = 0, queries = 0;
  bool has_sampling_points = false;  // "sampling_points" in maps: the model can explain
  bool has_plug_gate = false;        // "plug_gate" in maps
  std::vector<int64_t> level_strides;  // per level, input pixels per cell (PLuG models)
  ImageSize canvas;  // the model pads smaller inputs to this size
};

struct DetectionMapOptions {
  bool plug_gates = false;     // keep decoder and encoder PLuG gates
  int64_t max_detections = 1;  // most detections Finish may be asked for
};

// The maps of one detection, each stacked over decoder layers.
struct DetectionMapsOf {
  at::Tensor sampling_points;    // float32 [Ld, M, L, P, 2], (x, y) pixels
  at::Tensor attention_weights;  // float32 [Ld, M, L, P]
  at::Tensor plug_gate;          // float32 [Ld, M, L], with plug_gates
};

struct DetectionExplanation {
  std::vector<DetectionMapsOf> detections;  // in the order given to Finish
  std::vector<at::Tensor> encoder_plug_gates;  // per encoder layer and level: [M, L, h, w]
};

class DetectionMapCollector final : public MapCollector {
 public:
  // INVALID_ARGUMENT when the model cannot explain (no sampling points or decoder layers)
  // or plug_gates is asked of a model without PLuG gates.
  static absl::StatusOr<std::unique_ptr<DetectionMapCollector>> Create(
      const DetectionMapLayout& layout, const DetectionMapOptions& options, int64_t max_bytes);

  // For an input of `input`'s size (padded to the canvas): the larger of one encoder and
  // one decoder layer's maps as the model returns them, the decoder maps of every query
  // kept until the detections are known, the encoder gate maps (with plug_gates), and the
  // maps of max_detections detections.
  int64_t PeakBytes(ImageSize input) const override;

  // After every layer was added (INTERNAL otherwise): the maps of `detections` (their
  // queries), sampling points scaled to an image of `height` x `width` pixels.
  // RESOURCE_EXHAUSTED when they and the kept maps pass the budget.
  absl::StatusOr<DetectionExplanation> Finish(const std::vector<Detection>& detections,
                                              int64_t height, int64_t width);

 protected:
  // Encoder layers first ("plug_gate_level<k>" [M, L, h_k, w_k], kept with plug_gates),
  // then decoder layers ("sampling_locations" [Q, M, L, P, 2] normalised to the image,
  // "attention_weights" [Q, M, L, P], "plug_gate" [Q, M, L]). INTERNAL for missing or
  // misshapen maps.
  absl::Status Collect(int layer, const NamedTensors& maps) override;
  const char* Advice() const override { return "; ask for fewer detections (max_detections)"; }

 private:
  DetectionMapCollector(const DetectionMapLayout& layout, const DetectionMapOptions& options,
                        int64_t max_bytes)
      : MapCollector(layout.encoder_layers + layout.decoder_layers, max_bytes),
        layout_(layout),
        options_(options) {}
  absl::Status AddEncoderLayer(const NamedTensors& maps);
  absl::Status AddDecoderLayer(const NamedTensors& maps);
  absl::StatusOr<at::Tensor> Take(const NamedTensors& maps, const char* kind,
                                  const std::vector<int64_t>& shape);
  // Floats of one encoder layer's gate maps (all levels) for an input of `input`'s size.
  int64_t EncoderLayerFloats(ImageSize input) const;

  DetectionMapLayout layout_;
  DetectionMapOptions options_;
  std::vector<at::Tensor> locations_, weights_, gates_;  // per decoder layer, all queries
  std::vector<at::Tensor> encoder_gates_;
};

}  // namespace gatescope
