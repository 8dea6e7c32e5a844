#include "server/postprocess/segmentation.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/upsample_bilinear2d.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "absl/strings/str_cat.h"
#include "server/postprocess/png_encode.h"

namespace gatescope {

namespace {

// Per pixel of contiguous float32 [classes, pixels], the index of its largest value, the
// first on ties and the first NaN if any (torch.argmax's rule), into `mask`; per class,
// its pixels into `counts`. One pass over each class plane: ATen 1.13's argmax over the
// outer dimension walked it pixel by pixel with a stride and cost about 3 ms for a
// 5-class 217 x 181 map (docs/performance.md, "Segmentation masks").
void ArgmaxOverClasses(const float* scores, int64_t classes, int64_t pixels, uint8_t* mask,
                       std::vector<int64_t>& counts) {
  std::vector<float> best(scores, scores + pixels);
  std::fill(mask, mask + pixels, uint8_t{0});
  for (int64_t c = 1; c < classes; ++c) {
    const float* plane = scores + c * pixels;
    for (int64_t p = 0; p < pixels; ++p) {
      const float v = plane[p];
      if (!std::isnan(best[p]) && (v > best[p] || std::isnan(v))) {
        best[p] = v;
        mask[p] = static_cast<uint8_t>(c);
      }
    }
  }
  counts.assign(static_cast<size_t>(classes), 0);
  for (int64_t p = 0; p < pixels; ++p) ++counts[mask[p]];
}

}  // namespace

absl::StatusOr<std::string> EncodeMaskPng(const at::Tensor& mask) {
  if (mask.dim() != 2 || mask.scalar_type() != at::kByte) {
    return absl::InternalError("mask must be uint8 [H, W]");
  }
  const at::Tensor m = mask.contiguous();
  const cv::Mat image(static_cast<int>(m.size(0)), static_cast<int>(m.size(1)), CV_8UC1,
                      m.data_ptr());
  absl::StatusOr<std::string> png = EncodePng(image);
  if (!png.ok()) return absl::InternalError(png.status().message());
  return png;
}

absl::StatusOr<SegmentationResult> SegmentLogits(const at::Tensor& logits, int64_t height,
                                                 int64_t width,
                                                 const SegmentationOptions& options) {
  if (logits.dim() != 3 || logits.size(0) < 1 || logits.size(0) > 256) {
    return absl::InternalError("segmentation logits must be [classes (1..256), H, W]");
  }
  if (height <= 0 || width <= 0) return absl::InternalError("segmentation size must be positive");
  const int64_t classes = logits.size(0);
  if (options.classes > 0 && classes != options.classes) {
    return absl::InternalError(absl::StrCat("model returned ", classes, " class logits for ",
                                            options.classes, " labels"));
  }
  // Pixels are at most 2^24 (the input cap) and classes at most 256, so this cannot overflow.
  const int64_t pixels = height * width;
  const int64_t bytes = pixels * (classes * 4 * (options.probabilities ? 3 : 1) + 8 + 1);
  if (bytes > options.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a ", height, "x", width, " segmentation of ", classes, " classes needs ",
                     bytes, " bytes, over the server's ", options.max_bytes,
                     (options.probabilities ? "; ask without class_probabilities or" : ";"),
                     " send a smaller image"));
  }
  at::Tensor scores = logits.to(at::kFloat);
  if (scores.size(1) != height || scores.size(2) != width) {
    scores = at::upsample_bilinear2d(scores.unsqueeze(0), {height, width},
                                     /*align_corners=*/false, c10::nullopt, c10::nullopt)
                 .squeeze(0);
  }
  scores = scores.contiguous();
  SegmentationResult out;
  out.mask = at::empty({height, width}, at::kByte);
  ArgmaxOverClasses(scores.data_ptr<float>(), classes, pixels, out.mask.data_ptr<uint8_t>(),
                    out.class_pixels);
  if (options.probabilities) out.probabilities = at::softmax(scores, 0).contiguous();
  if (options.png) {
    auto png = EncodeMaskPng(out.mask);
    if (!png.ok()) return png.status();
    out.png = *std::move(png);
  }
  return out;
}

}  // namespace gatescope
