// The inputs of the image tasks, from either API, as makers that build one example: on a
// preparation thread or the model's worker (decoding is CPU-bound), or for a small image on
// the gRPC thread that received it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "gatescope/v1/inference.pb.h"
#include "server/api/kserve_tensors.h"
#include "server/common/image_size.h"
#include "server/config/model_config.h"

namespace gatescope {

// Builds one example [C, H, W] (normalised as the model says) and reports the size its
// dense outputs map back to (see DecodeImage).
using ImageMaker = std::function<absl::StatusOr<at::Tensor>(ImageSize* size)>;

// One image input: its maker and, for models that take images at their own size
// (native_size), a key naming that size when it is known without decoding (a pixel
// tensor's shape, or what an encoded image's header declares; 0 otherwise, and for every
// input of a model that resizes them all to its own size).
struct ImageInput {
  ImageMaker make;
  uint64_t shape_key = 0;
  // Made before queuing, on a preparation thread (Job::prepares_ahead): encoded images of
  // models whose examples have the model's own size. Images a native_size model takes at
  // their own size are made on the worker instead, so that a queue of them holds encoded
  // bytes, not decoded pixels (their decode is short next to their forward pass).
  bool ahead = false;
  // With `ahead`: the image is small (its header declares at most 128 x 128 pixels, and it
  // has at most 64 KiB), so it is decoded on the gRPC thread that receives it
  // (Job::prepares_on_caller): a hop to a preparation thread costs more than such a decode
  // (docs/performance.md).
  bool on_caller = false;
};

// The `image` (encoded PNG/JPEG) or `tensor` (pixels) of a gatescope.v1 request.
// INVALID_ARGUMENT (cheap, nothing decoded) for a missing or empty input or a tensor dtype
// other than UINT8 / FLOAT32. The maker views `image` and `tensor`, which must outlive it.
absl::StatusOr<ImageInput> V1ImageInput(bool has_input, bool is_image, const std::string& image,
                                        const ::gatescope::v1::Tensor& tensor,
                                        const InputSpec& spec);

template <typename Request>
absl::StatusOr<ImageInput> V1ImageInput(const Request& request, const InputSpec& spec) {
  return V1ImageInput(request.input_case() != Request::INPUT_NOT_SET,
                      request.input_case() == Request::kImage, request.image(), request.tensor(),
                      spec);
}

// One maker per example of a KServe input. Accepted inputs:
//   FP32  [B, C, H, W] or [C, H, W]: the model input itself (already normalised);
//   UINT8 [B, C, H, W] or [B, H, W] (C = 1): pixels, normalised as the model says;
//   BYTES [B] or [B, 1]: encoded PNG/JPEG images, decoded, resized and normalised.
// For models with input.any_size, H and W of FP32 and UINT8 inputs may be any size
// (CheckInputSize) and FP32 inputs are pixels in 0..1 (not normalised model inputs): both
// are resized to the model's size and normalised like gatescope.v1 pixel tensors.
// INVALID_ARGUMENT for anything else. The makers view `input`'s data, which must outlive
// them.
absl::StatusOr<std::vector<ImageInput>> KServeImageInputs(const KServeInput& input,
                                                          const InputSpec& spec);

}  // namespace gatescope
