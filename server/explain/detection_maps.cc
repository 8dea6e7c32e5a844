#include "server/explain/detection_maps.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gatescope {

absl::StatusOr<std::unique_ptr<DetectionMapCollector>> DetectionMapCollector::Create(
    const DetectionMapLayout& layout, const DetectionMapOptions& options, int64_t max_bytes) {
  if (!layout.has_sampling_points || layout.decoder_layers <= 0) {
    return absl::InvalidArgumentError(
        "model cannot explain (its metadata declares no sampling_points maps)");
  }
  if (options.plug_gates && !layout.has_plug_gate) {
    return absl::InvalidArgumentError("model has no PLuG gates (plug_gates)");
  }
  if (options.plug_gates &&
      static_cast<int64_t>(layout.level_strides.size()) != layout.levels) {
    return absl::InvalidArgumentError("model metadata lacks detection.level_strides");
  }
  return std::unique_ptr<DetectionMapCollector>(
      new DetectionMapCollector(layout, options, max_bytes));
}

int64_t DetectionMapCollector::EncoderLayerFloats(ImageSize input) const {
  if (!layout_.has_plug_gate) return 0;
  const int64_t h = std::max(input.height, layout_.canvas.height);
  const int64_t w = std::max(input.width, layout_.canvas.width);
  int64_t cells = 0;
  for (int64_t s : layout_.level_strides) {
    const int64_t stride = std::max<int64_t>(1, s);
    cells += ((h + stride - 1) / stride) * ((w + stride - 1) / stride);
  }
  return layout_.heads * layout_.levels * cells;
}

int64_t DetectionMapCollector::PeakBytes(ImageSize input) const {
  constexpr int64_t kFloatBytes = 4;
  const int64_t m = layout_.heads, l = layout_.levels, p = layout_.points;
  const int64_t per_query = m * l * p * 3 + (layout_.has_plug_gate ? m * l : 0);
  const int64_t decoder_layer = layout_.queries * per_query;
  const int64_t encoder_layer = EncoderLayerFloats(input);
  int64_t floats = std::max(decoder_layer, encoder_layer);  // one layer as returned
  floats += layout_.decoder_layers * decoder_layer;          // kept until Finish
  if (options_.plug_gates) floats += layout_.encoder_layers * encoder_layer;
  floats += options_.max_detections * layout_.decoder_layers * per_query;  // returned
  return floats * kFloatBytes;
}

absl::StatusOr<at::Tensor> DetectionMapCollector::Take(const NamedTensors& maps,
                                                       const char* kind,
                                                       const std::vector<int64_t>& shape) {
  auto it = maps.find(kind);
  if (it == maps.end()) {
    return absl::InternalError(absl::StrCat("model returned no '", kind, "' map"));
  }
  const at::Tensor& t = it->second;
  const bool any_grid = shape.size() == 4 && shape[2] < 0;  // encoder maps: [M, L, h, w]
  bool ok = t.dim() == static_cast<int64_t>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    ok = shape[i] < 0 ? t.size(i) >= 1 : t.size(i) == shape[i];
  }
  if (!ok) {
    return absl::InternalError(absl::StrCat("model's '", kind, "' map has shape [",
                                            absl::StrJoin(t.sizes(), ","), "], the contract says [",
                                            absl::StrJoin(shape, ","), "]",
                                            any_grid ? " (-1: any)" : ""));
  }
  return Keep(t);
}

absl::Status DetectionMapCollector::AddEncoderLayer(const NamedTensors& maps) {
  if (!options_.plug_gates) return absl::OkStatus();
  for (int64_t k = 0; k < layout_.levels; ++k) {
    const std::string kind = absl::StrCat("plug_gate_level", k);
    auto gate = Take(maps, kind.c_str(), {layout_.heads, layout_.levels, -1, -1});
    if (!gate.ok()) return gate.status();
    encoder_gates_.push_back(*std::move(gate));
  }
  return absl::OkStatus();
}

absl::Status DetectionMapCollector::AddDecoderLayer(const NamedTensors& maps) {
  const int64_t q = layout_.queries, m = layout_.heads, l = layout_.levels, p = layout_.points;
  auto locations = Take(maps, "sampling_locations", {q, m, l, p, 2});
  if (!locations.ok()) return locations.status();
  auto weights = Take(maps, "attention_weights", {q, m, l, p});
  if (!weights.ok()) return weights.status();
  locations_.push_back(*std::move(locations));
  weights_.push_back(*std::move(weights));
  if (options_.plug_gates) {
    auto gate = Take(maps, "plug_gate", {q, m, l});
    if (!gate.ok()) return gate.status();
    gates_.push_back(*std::move(gate));
  }
  return absl::OkStatus();
}

absl::Status DetectionMapCollector::Collect(int layer, const NamedTensors& maps) {
  return layer < layout_.encoder_layers ? AddEncoderLayer(maps) : AddDecoderLayer(maps);
}

absl::StatusOr<DetectionExplanation> DetectionMapCollector::Finish(
    const std::vector<Detection>& detections, int64_t height, int64_t width) {
  if (absl::Status st = CheckComplete(); !st.ok()) return st;
  DetectionExplanation out;
  const at::Tensor pixels =
      at::tensor({static_cast<float>(width), static_cast<float>(height)}, at::kFloat);
  for (const Detection& d : detections) {
    if (d.query < 0 || d.query >= layout_.queries) {
      return absl::InternalError(absl::StrCat("detection of query ", d.query, " out of range"));
    }
    auto pick = [&](const std::vector<at::Tensor>& per_layer) {
      std::vector<at::Tensor> rows;
      for (const at::Tensor& t : per_layer) rows.push_back(t[d.query]);
      return at::stack(rows);
    };
    DetectionMapsOf maps;
    maps.sampling_points = pick(locations_) * pixels;
    maps.attention_weights = pick(weights_);
    if (options_.plug_gates) maps.plug_gate = pick(gates_);
    absl::Status st = Charge(static_cast<int64_t>(
        maps.sampling_points.nbytes() + maps.attention_weights.nbytes() +
        (options_.plug_gates ? maps.plug_gate.nbytes() : 0)));
    if (!st.ok()) return st;
    out.detections.push_back(std::move(maps));
  }
  out.encoder_plug_gates = std::move(encoder_gates_);
  return out;
}

}  // namespace gatescope
