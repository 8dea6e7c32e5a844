// From pixels to the model's input example: the server-side resize of inputs of any size
// and the two normalisations an InputSpec can ask for. Pure ATen functions, thread-safe.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "server/common/image_size.h"
#include "server/config/model_config.h"

namespace gatescope {

// Bounds on inputs of any size (InputSpec.any_size).
inline constexpr int64_t kMaxInputSide = 8192;
inline constexpr int64_t kMaxInputPixels = int64_t{16} << 20;

// INVALID_ARGUMENT (naming `what`, e.g. "image") unless both sides are in
// 1..kMaxInputSide (spec.min_side..kMaxInputSide when min_side is set) and their product
// is at most kMaxInputPixels (or spec.max_pixels when set and smaller).
absl::Status CheckInputSize(ImageSize size, const InputSpec& spec, const char* what);

// `image` [C, H0, W0] float32 bilinearly resized to `size` (align_corners=False; the
// computation of torch.nn.functional.interpolate(mode="bilinear") in float32). Returns
// `image` itself when it already has that size.
at::Tensor ResizeBilinear(const at::Tensor& image, ImageSize size);

// Normalises float32 pixels [C, H, W] in 0..255 units as `spec` says: mean_std
// ((v * scale - mean[c]) / std[c]) or minmax ((v - min) / (max - min + 1e-6) over the
// whole example, as models/gatescope/segmentation.py's preprocess).
at::Tensor Normalise(const at::Tensor& pixels, const InputSpec& spec);

// 8-bit pixels -> the model input [C, H, W] float32, normalised mean_std as `spec` says,
// in one pass with no intermediate tensors (the per-request path of small images). The
// values are those of Normalise (on the CPU) over the same pixels as float32, bit for bit.
// `pixels` holds `channels` x `size` bytes, interleaved ([H, W, C], a decoded image) or
// planar ([C, H, W], a uint8 tensor input). Only for specs that do not use minmax.
at::Tensor NormaliseBytes(const uint8_t* pixels, int64_t channels, ImageSize size,
                          bool interleaved, const InputSpec& spec);

// The same 8-bit pixels -> what ToModelInput gives for them as float32 (resized when it
// would resize, then normalised): through NormaliseBytes when nothing is resized and the
// spec is mean_std, else through float32 tensors. `pixels` is only read during the call.
at::Tensor BytesToModelInput(const uint8_t* pixels, int64_t channels, ImageSize size,
                             bool interleaved, const InputSpec& spec);

// Pixels [C, H0, W0] float32 in 0..255 units -> the model input [C, H, W]: resized to the
// spec's [H, W] when they differ (the spec must allow any_size; callers check the shape
// otherwise) unless spec.native_size keeps [H0, W0], then normalised.
at::Tensor ToModelInput(const at::Tensor& pixels, const InputSpec& spec);

}  // namespace gatescope
