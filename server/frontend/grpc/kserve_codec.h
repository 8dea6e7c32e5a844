// Conversion between KServe v2 tensors and gatescope's per-example model inputs and
// named outputs. Pure (no gRPC calls), thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"
#include "server/config/model_config.h"
#include "server/preprocess/normalize.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

// Builds one example's model input; runs on the model's worker thread. If `output_size`
// is not null it receives the size the example's dense outputs map back to (see
// DecodeImage).
using ExampleMaker = std::function<absl::StatusOr<at::Tensor>(ImageSize* output_size)>;

// Splits the request's single input into per-example makers. Accepted inputs:
//   FP32  [B, C, H, W] or [C, H, W]: the model input itself (already normalised);
//   UINT8 [B, C, H, W] or [B, H, W] (C = 1): pixels, normalised as the model says;
//   BYTES [B] or [B, 1]: encoded PNG/JPEG images, decoded, resized and normalised.
// For models with input.any_size, H and W of FP32 and UINT8 inputs may be any size
// (CheckInputSize) and FP32 inputs are pixels in 0..1 (not normalised model inputs): both
// are resized to the model's size and normalised like gatescope.v1 pixel tensors.
// Contents come from raw_input_contents (BYTES raw: each element prefixed by its
// little-endian uint32 length) or from the typed contents field. The makers hold
// `request`, which must outlive them. INVALID_ARGUMENT for anything else.
absl::StatusOr<std::vector<ExampleMaker>> SplitInferInputs(
    const ::inference::ModelInferRequest& request, const InputSpec& spec);

// KServe datatype name of a tensor's dtype ("FP32", "INT64", ...); tensors of other types
// are sent as FP32.
std::string KServeDatatype(const at::Tensor& t);

// Appends output `name` to `response`: rows (one per example, batch dim removed) are
// stacked to [B, ...] and sent as raw little-endian contents.
absl::Status AppendOutput(const std::string& name, const std::vector<at::Tensor>& rows,
                          ::inference::ModelInferResponse* response);

}  // namespace gatescope
