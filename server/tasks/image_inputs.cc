#include "server/tasks/image_inputs.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/preprocess/image.h"
#include "server/preprocess/image_codec.h"

namespace gatescope {
namespace {

// Keys of images of a model that takes them at their own size; 0 for every other model.
uint64_t SizeKey(const InputSpec& spec, int64_t height, int64_t width) {
  if (!spec.native_size() || height <= 0 || width <= 0) return 0;
  return (static_cast<uint64_t>(height) << 32) ^ static_cast<uint64_t>(width);
}

// Images up to this many pixels and bytes are decoded on the receiving thread
// (ImageInput::on_caller). Both bounds, because a decode's cost is bounded by neither
// alone: a progressive JPEG or a PNG of many chunks can be large for its pixels.
constexpr int64_t kCallerDecodePixels = 128 * 128;
constexpr size_t kCallerDecodeBytes = 64 * 1024;

// An encoded image's input: its size key, and where it is decoded. The header is read here
// only where it decides one of them (the decode reads it again): a native-size model's key,
// or whether an image small in bytes is small in pixels too.
ImageInput EncodedImage(std::string_view bytes, const InputSpec& spec, ImageMaker make) {
  ImageInput input{std::move(make), 0, !spec.native_size()};
  if (input.ahead && bytes.size() > kCallerDecodeBytes) return input;  // to the pool
  const std::optional<ImageSize> declared = DeclaredImageSize(bytes);
  if (declared) {
    input.shape_key = SizeKey(spec, declared->height, declared->width);
    input.on_caller = input.ahead && declared->height * declared->width <= kCallerDecodePixels;
  }
  return input;
}

bool AllFinite(std::string_view float32s) {
  for (size_t at = 0; at + 4 <= float32s.size(); at += 4) {
    float v;
    std::memcpy(&v, float32s.data() + at, 4);
    if (!std::isfinite(v)) return false;
  }
  return true;
}

int64_t Product(const std::vector<int64_t>& v, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

absl::StatusOr<std::vector<ImageInput>> EncodedImages(const KServeInput& in,
                                                      const InputSpec& spec) {
  if (absl::Status st = CheckBytesBatch(in); !st.ok()) return st;
  std::vector<ImageInput> makers;
  for (std::string_view item : in.elements) {
    makers.push_back(EncodedImage(
        item, spec, [item, spec](ImageSize* size) { return DecodeImage(item, spec, size); }));
  }
  return makers;
}

// The input's shape as [B, C, H, W], checked against the model's input.
absl::StatusOr<std::vector<int64_t>> BatchShape(const KServeInput& in, const InputSpec& spec) {
  const bool fp32 = in.datatype == "FP32";
  std::vector<int64_t> shape = in.shape;
  const std::vector<int64_t> model(spec.shape().begin(), spec.shape().end());  // C, H, W
  if (fp32 && shape.size() == 3) shape.insert(shape.begin(), 1);
  if (!fp32 && shape.size() == 3 && model[0] == 1) shape.insert(shape.begin() + 1, 1);
  const bool any_size = spec.any_size();
  const bool matches = shape.size() == 4 &&
                       (any_size ? shape[1] == model[0]
                                 : std::vector<int64_t>(shape.begin() + 1, shape.end()) == model);
  if (!matches) {
    return InvalidInfer(absl::StrCat("input shape [", absl::StrJoin(in.shape, ","),
                                     "] does not match the model input [B,",
                                     any_size ? absl::StrCat(model[0], ",H,W")
                                              : absl::StrJoin(model, ","),
                                     "]"));
  }
  if (any_size) {
    if (absl::Status st = CheckInputSize({shape[2], shape[3]}, spec, "input"); !st.ok()) {
      return InvalidInfer(st.message());
    }
  }
  return shape;
}

absl::StatusOr<std::vector<ImageInput>> PixelTensors(const KServeInput& in,
                                                     const InputSpec& spec) {
  auto shape = BatchShape(in, spec);
  if (!shape.ok()) return shape.status();
  const bool fp32 = in.datatype == "FP32";
  const std::vector<int64_t> example(shape->begin() + 1, shape->end());
  const int64_t batch = (*shape)[0];
  const size_t example_bytes = static_cast<size_t>(Product(*shape, 1)) * (fp32 ? 4 : 1);
  // Divide rather than multiply: dimensions come from the client and could overflow.
  if (batch == 0 || example_bytes == 0 || in.data.size() % example_bytes != 0 ||
      in.data.size() / example_bytes != static_cast<size_t>(batch)) {
    return InvalidInfer(absl::StrCat("input has ", in.data.size(), " bytes, shape needs ", batch,
                                     " x ", example_bytes));
  }
  std::vector<ImageInput> makers;
  const auto owned = in.owned;  // keeps typed contents alive for the makers
  const uint64_t key = SizeKey(spec, (*shape)[2], (*shape)[3]);
  for (int64_t b = 0; b < batch; ++b) {
    std::string_view slice = in.data.substr(b * example_bytes, example_bytes);
    if (fp32 && !spec.any_size()) {
      makers.push_back({[slice, example, owned](ImageSize* size) -> absl::StatusOr<at::Tensor> {
        // Policy for non-finite inputs: refused, like non-finite pixels (PixelsToTensor);
        // a NaN would otherwise come back as NaN outputs with OK.
        if (!AllFinite(slice)) {
          return absl::InvalidArgumentError("FP32 input has non-finite values (NaN or Inf)");
        }
        // No copy: the example views the request's bytes (kept alive by the call, or by
        // `owned`, until the job finishes); gathering a batch of several is the one copy,
        // a batch of one passes these bytes to the model (BatchAssembly::Gather).
        at::Tensor t = at::from_blob(
            const_cast<char*>(slice.data()), example, [owned](void*) {},
            at::TensorOptions().dtype(at::kFloat));
        if (size != nullptr) *size = {example[1], example[2]};
        return t;
      }, key});
    } else {
      const PixelType type = fp32 ? PixelType::kFloat32 : PixelType::kUint8;
      makers.push_back({[slice, example, owned, spec, type](ImageSize* size) {
        return PixelsToTensor(slice, type, example, spec, size);
      }, key});
    }
  }
  return makers;
}

}  // namespace

absl::StatusOr<ImageInput> V1ImageInput(bool has_input, bool is_image, const std::string& image,
                                        const ::gatescope::v1::Tensor& tensor,
                                        const InputSpec& spec) {
  if (!has_input) return absl::InvalidArgumentError("request has no input (set image or tensor)");
  if (is_image) {
    if (image.empty()) return absl::InvalidArgumentError("image is empty");
    return EncodedImage(
        image, spec, [&image, spec](ImageSize* size) { return DecodeImage(image, spec, size); });
  }
  if (tensor.dtype() != v1::Tensor::UINT8 && tensor.dtype() != v1::Tensor::FLOAT32) {
    return absl::InvalidArgumentError("tensor.dtype must be UINT8 or FLOAT32");
  }
  const int rank = tensor.shape_size();
  const uint64_t key =
      rank >= 2 ? SizeKey(spec, tensor.shape(rank - 2), tensor.shape(rank - 1)) : 0;
  return ImageInput{[&tensor, spec](ImageSize* size) {
    const std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
    const PixelType type =
        tensor.dtype() == v1::Tensor::UINT8 ? PixelType::kUint8 : PixelType::kFloat32;
    return PixelsToTensor(tensor.data(), type, shape, spec, size);
  }, key};
}

absl::StatusOr<std::vector<ImageInput>> KServeImageInputs(const KServeInput& input,
                                                          const InputSpec& spec) {
  if (input.datatype == "BYTES") return EncodedImages(input, spec);
  return PixelTensors(input, spec);
}

}  // namespace gatescope
