#include "server/preprocess/image.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gatescope {
namespace {

// Applies (v * scale - mean[c]) / std[c] to float pixels in 0..255 units, [C,H,W].
at::Tensor Normalise(at::Tensor pixels, const InputSpec& spec) {
  const int64_t channels = pixels.size(0);
  auto mean = at::empty({channels, 1, 1}, at::kFloat);
  auto std = at::empty({channels, 1, 1}, at::kFloat);
  for (int64_t c = 0; c < channels; ++c) {
    mean[c] = spec.mean(c);
    std[c] = spec.std(c);
  }
  return ((pixels * spec.scale()) - mean) / std;
}

}  // namespace

absl::StatusOr<at::Tensor> DecodeImage(std::string_view bytes, const InputSpec& spec) {
  if (bytes.empty()) return absl::InvalidArgumentError("image is empty");
  const bool gray = spec.color() == "gray";
  cv::Mat decoded;
  try {
    const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1,
                      const_cast<char*>(bytes.data()));
    decoded = cv::imdecode(raw, gray ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("image could not be decoded: ", e.what()));
  }
  if (decoded.empty()) {
    return absl::InvalidArgumentError("image could not be decoded (PNG or JPEG expected)");
  }
  const int h = static_cast<int>(spec.shape(1)), w = static_cast<int>(spec.shape(2));
  cv::Mat resized = decoded;
  try {
    if (decoded.rows != h || decoded.cols != w) {
      const bool shrink = decoded.rows > h || decoded.cols > w;
      cv::resize(decoded, resized, cv::Size(w, h), 0, 0,
                 shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
    }
    if (!gray) cv::cvtColor(resized, resized, cv::COLOR_BGR2RGB);
  } catch (const cv::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("image could not be resized: ", e.what()));
  }
  cv::Mat contiguous = resized.isContinuous() ? resized : resized.clone();
  const int64_t channels = gray ? 1 : 3;
  // HWC uint8 -> CHW float
  at::Tensor hwc = at::from_blob(contiguous.data, {h, w, channels}, at::kByte);
  at::Tensor chw = hwc.permute({2, 0, 1}).to(at::kFloat).contiguous();
  return Normalise(chw, spec);
}

absl::StatusOr<at::Tensor> PixelsToTensor(std::string_view data, PixelType type,
                                          const std::vector<int64_t>& shape,
                                          const InputSpec& spec) {
  std::vector<int64_t> want(spec.shape().begin(), spec.shape().end());
  std::vector<int64_t> got = shape;
  if (got.size() == 2 && want[0] == 1) got.insert(got.begin(), 1);
  if (got != want) {
    return absl::InvalidArgumentError(absl::StrCat("tensor shape [", absl::StrJoin(shape, ","),
                                                   "] does not match the model input [",
                                                   absl::StrJoin(want, ","), "]"));
  }
  const int64_t count = want[0] * want[1] * want[2];
  const size_t elem = type == PixelType::kUint8 ? 1 : 4;
  if (data.size() != static_cast<size_t>(count) * elem) {
    return absl::InvalidArgumentError(absl::StrCat("tensor data has ", data.size(),
                                                   " bytes, shape needs ", count * elem));
  }
  at::Tensor pixels;
  if (type == PixelType::kUint8) {
    pixels = at::empty(want, at::kByte);
    std::memcpy(pixels.data_ptr(), data.data(), data.size());
    pixels = pixels.to(at::kFloat);
  } else {
    pixels = at::empty(want, at::kFloat);
    std::memcpy(pixels.data_ptr(), data.data(), data.size());
    const float* p = pixels.data_ptr<float>();
    for (int64_t i = 0; i < count; ++i) {
      if (!std::isfinite(p[i]) || p[i] < 0.f || p[i] > 1.f) {
        return absl::InvalidArgumentError("float32 pixels must be finite and within [0, 1]");
      }
    }
    pixels = pixels * 255.f;
  }
  return Normalise(pixels, spec);
}

}  // namespace gatescope
