#include "server/preprocess/image.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>

#include <cmath>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/preprocess/image_codec.h"

namespace gatescope {
namespace {

ImageSize ModelSize(const InputSpec& spec) { return {spec.shape(1), spec.shape(2)}; }

// Runs f, turning Torch's exceptions (e.g. allocation failures) into INTERNAL.
template <typename F>
absl::StatusOr<at::Tensor> Caught(F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("preprocessing failed: ", e.what_without_backtrace()));
  }
}

// The shape [C, H0, W0] a pixel tensor of `shape` stands for ([H0, W0] gains C = 1 when
// the model has one channel); unchanged otherwise.
std::vector<int64_t> WithChannels(const std::vector<int64_t>& shape, const InputSpec& spec) {
  std::vector<int64_t> out = shape;
  if (out.size() == 2 && spec.shape(0) == 1) out.insert(out.begin(), 1);
  return out;
}

absl::Status CheckPixelShape(const std::vector<int64_t>& shape, const InputSpec& spec) {
  const std::vector<int64_t> want(spec.shape().begin(), spec.shape().end());
  const std::vector<int64_t> got = WithChannels(shape, spec);
  if (!spec.any_size()) {
    if (got == want) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("tensor shape [", absl::StrJoin(shape, ","),
                                                   "] does not match the model input [",
                                                   absl::StrJoin(want, ","), "]"));
  }
  if (got.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor shape [", absl::StrJoin(shape, ","), "] must be [C, H, W]",
        want[0] == 1 ? " or [H, W]" : ""));
  }
  if (got[0] != want[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor has ", got[0], " channels, model expects ", want[0]));
  }
  return CheckInputSize({got[1], got[2]}, spec, "tensor");
}

}  // namespace

absl::StatusOr<at::Tensor> DecodeImage(std::string_view bytes, const InputSpec& spec,
                                       ImageSize* output_size) {
  if (bytes.empty()) return absl::InvalidArgumentError("image is empty");
  // The size is checked from the decoder's own header read before any pixel is allocated.
  const absl::StatusOr<ImageHeader> header = ReadImageHeader(bytes);
  if (!header.ok()) return header.status();
  if (absl::Status st = CheckInputSize(header->size, spec, "image"); !st.ok()) return st;
  const bool gray = spec.color() == "gray";
  DecodeRequest request{gray, spec.any_size() ? ImageSize{} : ModelSize(spec)};
  absl::StatusOr<cv::Mat> pixels = DecodeImagePixels(bytes, *header, request);
  if (!pixels.ok()) return pixels.status();
  const cv::Mat& decoded = *pixels;  // RGB or gray, possibly scaled down (JPEG)
  const ImageSize model = ModelSize(spec);
  const ImageSize own = header->size;
  const int h = static_cast<int>(model.height), w = static_cast<int>(model.width);
  cv::Mat resized = decoded;
  try {
    if (!spec.any_size() && (decoded.rows != h || decoded.cols != w)) {
      const bool shrink = decoded.rows > h || decoded.cols > w;
      cv::resize(decoded, resized, cv::Size(w, h), 0, 0,
                 shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
    }
  } catch (const cv::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("image could not be resized: ", e.what()));
  }
  cv::Mat contiguous = resized.isContinuous() ? resized : resized.clone();
  const int64_t channels = gray ? 1 : 3;
  if (output_size != nullptr) *output_size = spec.any_size() ? own : model;
  return Caught([&] {
    return BytesToModelInput(contiguous.data, channels, {contiguous.rows, contiguous.cols},
                             /*interleaved=*/true, spec);
  });
}

absl::StatusOr<at::Tensor> PixelsToTensor(std::string_view data, PixelType type,
                                          const std::vector<int64_t>& shape,
                                          const InputSpec& spec, ImageSize* output_size) {
  if (absl::Status st = CheckPixelShape(shape, spec); !st.ok()) return st;
  const std::vector<int64_t> dims = WithChannels(shape, spec);  // [C, H0, W0], checked
  const int64_t count = dims[0] * dims[1] * dims[2];
  const size_t elem = type == PixelType::kUint8 ? 1 : 4;
  if (data.size() != static_cast<size_t>(count) * elem) {
    return absl::InvalidArgumentError(absl::StrCat("tensor data has ", data.size(),
                                                   " bytes, shape needs ", count * elem));
  }
  if (type == PixelType::kFloat32) {
    for (int64_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, data.data() + i * 4, 4);
      if (!std::isfinite(v) || v < 0.f || v > 1.f) {
        return absl::InvalidArgumentError("float32 pixels must be finite and within [0, 1]");
      }
    }
  }
  if (output_size != nullptr) *output_size = {dims[1], dims[2]};
  return Caught([&] {
    if (type == PixelType::kUint8) {
      return BytesToModelInput(reinterpret_cast<const uint8_t*>(data.data()), dims[0],
                               {dims[1], dims[2]}, /*interleaved=*/false, spec);
    }
    at::Tensor pixels = at::empty(dims, at::kFloat);
    std::memcpy(pixels.data_ptr(), data.data(), data.size());
    return ToModelInput(pixels * 255.f, spec);
  });
}

}  // namespace gatescope
