// The KServe v2 REST inference body (Open Inference Protocol JSON, with Triton's binary
// tensor data extension) to and from the ModelInferRequest / ModelInferResponse messages
// the core answers. JSON through nlohmann::json (Debian's nlohmann-json3-dev: maintained,
// header-only; tensor-heavy clients use the binary extension, which bypasses JSON numbers).
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"

namespace gatescope {

// Which outputs the client wants as binary data rather than JSON numbers.
struct BinaryOutputs {
  bool by_default = false;             // request parameter "binary_data_output"
  std::map<std::string, bool> by_name;  // output parameter "binary_data"
  bool binary(const std::string& name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? by_default : it->second;
  }
};

struct ParsedInfer {
  ::inference::ModelInferRequest request;  // every input as raw_input_contents
  BinaryOutputs binary;
};

// Parses `body`: its first `json_length` bytes (the Inference-Header-Content-Length
// header; nullopt: the whole body) are the JSON request, the rest the binary data of the
// inputs that declare "binary_data_size", in input order. Tensor "data" may be flat or
// nested row-major arrays. INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<ParsedInfer> ParseInferRequest(std::string_view body,
                                              std::optional<size_t> json_length);

struct InferBody {
  std::string body;
  std::optional<size_t> json_length;  // set when binary data follows the JSON
};

// The response body: JSON, each output's "data" as numbers or strings, or (binary outputs)
// "parameters": {"binary_data_size": n} with the bytes appended after the JSON in output
// order.
InferBody WriteInferResponse(const ::inference::ModelInferResponse& response,
                             const BinaryOutputs& binary);

}  // namespace gatescope
