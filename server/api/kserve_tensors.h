// KServe v2 tensors as gatescope reads and writes them: the request's single input with
// its bytes (raw or typed contents), and named outputs stacked over the examples. Pure
// protobuf and ATen (no gRPC calls), thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"
#include "server/api/kserve_bytes.h"

namespace gatescope {

// The one input tensor of a ModelInfer request.
struct KServeInput {
  std::string datatype;        // "FP32", "UINT8" or "BYTES"
  std::vector<int64_t> shape;  // as sent, every entry >= 0
  // FP32 / UINT8: the little-endian element bytes (viewing the request's raw contents, or
  // `owned` for typed contents).
  std::string_view data;
  // BYTES: one view per element.
  std::vector<std::string_view> elements;
  std::shared_ptr<const std::string> owned;
};

// Reads the request's single input. Views point into `request` (or into `owned`), which
// must outlive them. INVALID_ARGUMENT ("ModelInfer: ...") for anything but exactly one
// FP32, UINT8 or BYTES input with consistent contents (BYTES raw contents: each element
// prefixed by its little-endian uint32 length).
absl::StatusOr<KServeInput> ReadSingleInput(const ::inference::ModelInferRequest& request);

// INVALID_ARGUMENT ("ModelInfer: ...").
absl::Status InvalidInfer(absl::string_view what);

// A BYTES input of one element per example: shape [B] or [B, 1] with B elements;
// INVALID_ARGUMENT ("ModelInfer: ...") otherwise.
absl::Status CheckBytesBatch(const KServeInput& input);

// KServe datatype name of a tensor's dtype ("FP32", "INT64", ...); tensors of other types
// are sent as FP32.
std::string KServeDatatype(const at::Tensor& t);

// Appends output `name` to `response`: rows (one per example, batch dim removed) are
// stacked to [B, ...] and sent as raw little-endian contents. INVALID_ARGUMENT when the
// rows differ in shape (examples of different sizes).
absl::Status AppendOutput(const std::string& name, const std::vector<at::Tensor>& rows,
                          ::inference::ModelInferResponse* response);

// Appends output `name` as Triton's classification extension: per example (row flattened)
// the `k` highest values (fewer when the row is shorter), highest first, as BYTES
// "score:index" or "score:index:label" (label when `labels` names the index), shape
// [B, k]; raw contents, each element prefixed by its little-endian uint32 length.
absl::Status AppendClassification(const std::string& name, const std::vector<at::Tensor>& rows,
                                  int64_t k, const std::vector<std::string>& labels,
                                  ::inference::ModelInferResponse* response);

}  // namespace gatescope
