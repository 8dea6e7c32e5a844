// Conversion of client inputs (encoded images, raw pixel tensors) into the model's input
// example [C, H, W] float32, normalised as the model's InputSpec says. Pure functions,
// thread-safe; CPU-bound (call them off the gRPC threads).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/config/model_config.h"

namespace gatescope {

// Decodes PNG or JPEG bytes, converts to the spec's colour (gray or RGB), resizes to
// [H, W] (area filter when shrinking, bilinear when enlarging) and normalises.
// INVALID_ARGUMENT for empty or undecodable bytes.
absl::StatusOr<at::Tensor> DecodeImage(std::string_view bytes, const InputSpec& spec);

enum class PixelType { kUint8, kFloat32 };

// Interprets `data` as little-endian pixels of `shape` ([C, H, W], or [H, W] when C = 1),
// which must equal the spec's shape (no resizing). UINT8 is 0..255, FLOAT32 is 0..1.
// INVALID_ARGUMENT for a shape, size or value-range mismatch.
absl::StatusOr<at::Tensor> PixelsToTensor(std::string_view data, PixelType type,
                                          const std::vector<int64_t>& shape,
                                          const InputSpec& spec);

}  // namespace gatescope
