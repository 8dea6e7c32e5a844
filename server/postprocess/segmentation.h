// Turns one example's segmentation logits into its class map at the input's own size.
// Pure (ATen; libpng for the mask's PNG), thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace gatescope {

// Largest working set SegmentLogits may allocate for one example (resized logits, argmax,
// probabilities and their copy): a few-KB PNG can declare a 16-Mpixel image.
inline constexpr int64_t kMaxSegmentationBytes = int64_t{1} << 30;

struct SegmentationOptions {
  bool probabilities = false;  // also return the per-pixel softmax
  bool png = false;            // also return the mask as an 8-bit grayscale PNG
  int64_t classes = 0;         // the model's label count; > 0: logits must have exactly it
  int64_t max_bytes = kMaxSegmentationBytes;
};

struct SegmentationResult {
  at::Tensor mask;                    // uint8 [H0, W0]: class index per pixel
  std::vector<int64_t> class_pixels;  // per class; sums to H0 * W0
  at::Tensor probabilities;           // float32 [classes, H0, W0], if asked
  std::string png;                    // PNG of `mask` (pixel value = class), if asked
};

// `logits` is one example's [classes, H, W] (classes in 1..256). They are resized
// bilinearly (align_corners=False) to [height, width] when that differs from [H, W], then
// each pixel takes the index of its largest logit (the first on ties), as
// models/gatescope/segmentation.py's logits_at + argmax. Probabilities are the softmax over
// classes of the resized logits. INTERNAL for logits of another rank or class count, or a
// size that is not positive; RESOURCE_EXHAUSTED (before allocating) when the working set
// for [height, width] would exceed options.max_bytes.
absl::StatusOr<SegmentationResult> SegmentLogits(const at::Tensor& logits, int64_t height,
                                                 int64_t width, const SegmentationOptions& options);

// `mask` (uint8 [H0, W0]) as an 8-bit grayscale PNG. INTERNAL if encoding fails.
absl::StatusOr<std::string> EncodeMaskPng(const at::Tensor& mask);

}  // namespace gatescope
