// libFuzzer harness: any bytes as a KServe v2 REST inference body. The first byte picks
// whether an Inference-Header-Content-Length splits JSON from binary data (and where); the
// rest is the body. A parsed request's inputs are then echoed as a response and written
// both as JSON numbers and as binary data. Must end in a status or a body, never a crash.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "server/frontend/http/infer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::optional<size_t> json_length;
  if (data[0] & 1) json_length = (data[0] >> 1) * body.size() / 127;
  auto parsed = gatescope::ParseInferRequest(body, json_length);
  if (!parsed.ok()) return 0;
  inference::ModelInferResponse response;
  const auto& request = parsed->request;
  for (int i = 0; i < request.inputs_size(); ++i) {
    auto* out = response.add_outputs();
    out->set_name(request.inputs(i).name());
    out->set_datatype(request.inputs(i).datatype());
    *out->mutable_shape() = request.inputs(i).shape();
    response.add_raw_output_contents(request.raw_input_contents(i));
  }
  gatescope::BinaryOutputs as_json;
  gatescope::BinaryOutputs as_binary;
  as_binary.by_default = true;
  (void)gatescope::WriteInferResponse(response, as_json);
  (void)gatescope::WriteInferResponse(response, as_binary);
  return 0;
}
