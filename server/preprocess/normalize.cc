#include "server/preprocess/normalize.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/upsample_bilinear2d.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

// Mirrors models/gatescope/segmentation.py MINMAX_EPS.
constexpr double kMinMaxEps = 1e-6;

}  // namespace

absl::Status CheckInputSize(ImageSize size, const InputSpec& spec, const char* what) {
  const int64_t min_side = std::max<int64_t>(1, spec.min_side());
  const int64_t max_pixels =
      spec.max_pixels() > 0 ? std::min(kMaxInputPixels, spec.max_pixels()) : kMaxInputPixels;
  const bool sides_ok = size.height >= min_side && size.height <= kMaxInputSide &&
                        size.width >= min_side && size.width <= kMaxInputSide;
  if (!sides_ok || size.height * size.width > max_pixels) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of ", size.height, "x", size.width, " pixels: height and width must be in ",
        min_side, "..", kMaxInputSide, " and their product at most ", max_pixels));
  }
  return absl::OkStatus();
}

at::Tensor ResizeBilinear(const at::Tensor& image, ImageSize size) {
  if (image.size(1) == size.height && image.size(2) == size.width) return image;
  return at::upsample_bilinear2d(image.unsqueeze(0), {size.height, size.width},
                                 /*align_corners=*/false, c10::nullopt, c10::nullopt)
      .squeeze(0);
}

at::Tensor Normalise(const at::Tensor& pixels, const InputSpec& spec) {
  if (UsesMinMax(spec)) {
    // Same operations, shapes aside, as the Python reference, so float32 results agree.
    const at::Tensor flat = pixels.reshape({1, -1});
    const at::Tensor lo = std::get<0>(flat.min(1)).view({1, 1, 1});
    const at::Tensor hi = std::get<0>(flat.max(1)).view({1, 1, 1});
    return (pixels - lo) / (hi - lo + kMinMaxEps);
  }
  const int64_t channels = pixels.size(0);
  auto mean = at::empty({channels, 1, 1}, at::kFloat);
  auto std = at::empty({channels, 1, 1}, at::kFloat);
  for (int64_t c = 0; c < channels; ++c) {
    mean[c] = spec.mean(c);
    std[c] = spec.std(c);
  }
  return ((pixels * spec.scale()) - mean) / std;
}

at::Tensor NormaliseBytes(const uint8_t* pixels, int64_t channels, ImageSize size,
                          bool interleaved, const InputSpec& spec) {
  const int64_t plane = size.height * size.width;
  at::Tensor out = at::empty({channels, size.height, size.width}, at::kFloat);
  float* to = out.data_ptr<float>();
  // Normalise's three float32 operations, in its order and rounding: v * scale, - mean,
  // / std (this file is built with -ffp-contract=off, so no multiply-add fuses them),
  // done once per byte value into a table: a division per value instead of per pixel.
  const float scale = spec.scale();
  float table[256];
  for (int64_t c = 0; c < channels; ++c) {
    const float mean = spec.mean(static_cast<int>(c));
    const float std = spec.std(static_cast<int>(c));
    for (int v = 0; v < 256; ++v) table[v] = (static_cast<float>(v) * scale - mean) / std;
    const int64_t first = interleaved ? c : c * plane;
    const int64_t step = interleaved ? channels : 1;
    float* row = to + c * plane;
    for (int64_t i = 0; i < plane; ++i) row[i] = table[pixels[first + i * step]];
  }
  return out;
}

at::Tensor BytesToModelInput(const uint8_t* pixels, int64_t channels, ImageSize size,
                             bool interleaved, const InputSpec& spec) {
  const bool resizes =
      !spec.native_size() && (size.height != spec.shape(1) || size.width != spec.shape(2));
  if (!resizes && !UsesMinMax(spec)) {
    return NormaliseBytes(pixels, channels, size, interleaved, spec);
  }
  auto* bytes = const_cast<uint8_t*>(pixels);  // read only: converted to float32 below
  const at::Tensor chw =
      interleaved
          ? at::from_blob(bytes, {size.height, size.width, channels}, at::kByte).permute({2, 0, 1})
          : at::from_blob(bytes, {channels, size.height, size.width}, at::kByte);
  return ToModelInput(chw.to(at::kFloat).contiguous(), spec);
}

at::Tensor ToModelInput(const at::Tensor& pixels, const InputSpec& spec) {
  const at::Tensor resized =
      spec.native_size() ? pixels : ResizeBilinear(pixels, {spec.shape(1), spec.shape(2)});
  return Normalise(resized.contiguous(), spec);
}

}  // namespace gatescope
