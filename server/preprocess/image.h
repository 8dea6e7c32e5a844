// Conversion of client inputs (encoded images, raw pixel tensors) into the model's input
// example [C, H, W] float32, normalised as the model's InputSpec says. Pure functions,
// thread-safe; CPU-bound (on a gRPC thread only for small images: ImageInput::on_caller).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/config/model_config.h"
#include "server/preprocess/normalize.h"

namespace gatescope {

// Decodes PNG or JPEG bytes (image_codec.h: only those formats, size checked from the
// decoder's header before decoding, JPEGs for a smaller model decoded at a reduced scale)
// in the spec's colour (gray or RGB). With
// spec.any_size the image keeps its own size when decoded (checked by CheckInputSize) and
// is resized to [H, W] by ToModelInput (kept with native_size); otherwise OpenCV resizes it
// to [H, W] (area filter when shrinking, bilinear when enlarging). Then normalises.
// If `output_size` is not null it receives the size dense outputs map back to: the
// image's own with any_size, the model's [H, W] otherwise.
// INVALID_ARGUMENT for empty, undecodable or (any_size) too small or large images.
absl::StatusOr<at::Tensor> DecodeImage(std::string_view bytes, const InputSpec& spec,
                                       ImageSize* output_size = nullptr);

enum class PixelType { kUint8, kFloat32 };

// Interprets `data` as little-endian pixels of `shape` ([C, H0, W0], or [H0, W0] when
// C = 1). UINT8 is 0..255, FLOAT32 is 0..1. Without spec.any_size the shape must equal the
// spec's; with it C must be the spec's and (H0, W0) pass CheckInputSize, and the pixels are
// resized to [H, W]. `output_size` as for DecodeImage ((H0, W0) with any_size).
// INVALID_ARGUMENT for a shape, size or value-range mismatch.
absl::StatusOr<at::Tensor> PixelsToTensor(std::string_view data, PixelType type,
                                          const std::vector<int64_t>& shape,
                                          const InputSpec& spec,
                                          ImageSize* output_size = nullptr);

}  // namespace gatescope
