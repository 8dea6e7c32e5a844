#include "server/frontend/http/infer_json.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/api/kserve_bytes.h"

namespace gatescope {
namespace {

namespace kv = ::inference;
using json = nlohmann::json;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("infer request: ", what));
}

// Bytes per element of a fixed-size datatype; 0 for BYTES; -1 for unknown.
int ElementBytes(const std::string& datatype) {
  if (datatype == "BOOL" || datatype == "UINT8" || datatype == "INT8") return 1;
  if (datatype == "UINT16" || datatype == "INT16" || datatype == "FP16" || datatype == "BF16") {
    return 2;
  }
  if (datatype == "UINT32" || datatype == "INT32" || datatype == "FP32") return 4;
  if (datatype == "UINT64" || datatype == "INT64" || datatype == "FP64") return 8;
  if (datatype == "BYTES") return 0;
  return -1;
}

// Row-major leaves of a (possibly nested) JSON array. Iterative: a body may nest as deep as
// it is long.
void Flatten(const json& value, std::vector<const json*>& out) {
  std::vector<const json*> pending{&value};  // in reverse visiting order
  while (!pending.empty()) {
    const json* v = pending.back();
    pending.pop_back();
    if (!v->is_array()) {
      out.push_back(v);
      continue;
    }
    for (auto it = v->rbegin(); it != v->rend(); ++it) pending.push_back(&*it);
  }
}

template <typename T>
absl::Status AppendNumber(const json& v, std::string& raw) {
  T x;
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return Invalid("BOOL data must be true or false");
    x = v.get<bool>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return Invalid("numeric data expected");
    x = static_cast<T>(v.get<double>());
  } else {
    if (!v.is_number_integer()) return Invalid("integer data expected");
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return Invalid("integer data out of the datatype's range");
      }
      x = static_cast<T>(u);
    } else {
      const int64_t i = v.get<int64_t>();
      if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        return Invalid("integer data out of the datatype's range");
      }
      x = static_cast<T>(i);
    }
  }
  raw.append(reinterpret_cast<const char*>(&x), sizeof(T));
  return absl::OkStatus();
}

// The raw little-endian contents of JSON tensor data.
absl::StatusOr<std::string> RawFromJson(const std::string& datatype, const json& data) {
  std::vector<const json*> leaves;
  Flatten(data, leaves);
  std::string raw;
  for (const json* v : leaves) {
    absl::Status st;
    if (datatype == "BYTES") {
      if (!v->is_string()) return Invalid("BYTES data must be strings");
      AppendBytesElement(v->get_ref<const std::string&>(), raw);
      continue;
    }
    if (datatype == "BOOL") st = AppendNumber<bool>(*v, raw);
    else if (datatype == "UINT8") st = AppendNumber<uint8_t>(*v, raw);
    else if (datatype == "INT8") st = AppendNumber<int8_t>(*v, raw);
    else if (datatype == "UINT16") st = AppendNumber<uint16_t>(*v, raw);
    else if (datatype == "INT16") st = AppendNumber<int16_t>(*v, raw);
    else if (datatype == "UINT32") st = AppendNumber<uint32_t>(*v, raw);
    else if (datatype == "INT32") st = AppendNumber<int32_t>(*v, raw);
    else if (datatype == "UINT64") st = AppendNumber<uint64_t>(*v, raw);
    else if (datatype == "INT64") st = AppendNumber<int64_t>(*v, raw);
    else if (datatype == "FP32") st = AppendNumber<float>(*v, raw);
    else if (datatype == "FP64") st = AppendNumber<double>(*v, raw);
    else return Invalid(absl::StrCat(datatype, " data cannot be sent as JSON; use binary data"));
    if (!st.ok()) return st;
  }
  return raw;
}

// A JSON parameter value as an InferParameter.
absl::StatusOr<kv::InferParameter> Parameter(const std::string& key, const json& v) {
  kv::InferParameter p;
  if (v.is_boolean()) p.set_bool_param(v.get<bool>());
  else if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      p.set_int64_param(static_cast<int64_t>(u));
    } else {
      p.set_uint64_param(u);
    }
  } else if (v.is_number_integer()) p.set_int64_param(v.get<int64_t>());
  else if (v.is_number_float()) p.set_double_param(v.get<double>());
  else if (v.is_string()) p.set_string_param(v.get<std::string>());
  else return Invalid(absl::StrCat("parameter '", key, "' must be a bool, number or string"));
  return p;
}

// Copies `object`'s parameters into `out`, leaving out the REST-only ones in `skip`.
absl::Status CopyParameters(const json& object, std::initializer_list<const char*> skip,
                            google::protobuf::Map<std::string, kv::InferParameter>* out) {
  auto it = object.find("parameters");
  if (it == object.end()) return absl::OkStatus();
  if (!it->is_object()) return Invalid("parameters must be an object");
  for (const auto& [key, value] : it->items()) {
    bool skipped = false;
    for (const char* s : skip) skipped = skipped || key == s;
    if (skipped) continue;
    auto p = Parameter(key, value);
    if (!p.ok()) return p.status();
    (*out)[key] = *std::move(p);
  }
  return absl::OkStatus();
}

std::optional<bool> BoolParameter(const json& object, const char* name) {
  auto params = object.find("parameters");
  if (params == object.end() || !params->is_object()) return std::nullopt;
  auto it = params->find(name);
  if (it == params->end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

absl::StatusOr<std::string> String(const json& object, const char* key, bool required) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (required) return Invalid(absl::StrCat("'", key, "' is required"));
    return std::string();
  }
  if (!it->is_string()) return Invalid(absl::StrCat("'", key, "' must be a string"));
  return it->get<std::string>();
}

absl::Status ParseInput(const json& in, std::string_view& binary, kv::ModelInferRequest& out) {
  if (!in.is_object()) return Invalid("each input must be an object");
  auto* tensor = out.add_inputs();
  auto name = String(in, "name", true);
  if (!name.ok()) return name.status();
  tensor->set_name(*name);
  auto datatype = String(in, "datatype", true);
  if (!datatype.ok()) return datatype.status();
  tensor->set_datatype(*datatype);
  auto shape = in.find("shape");
  if (shape == in.end() || !shape->is_array()) return Invalid("input 'shape' must be an array");
  int64_t elements = 1;
  for (const json& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Invalid("input shape entries must be non-negative integers");
    }
    tensor->add_shape(d.get<int64_t>());
    elements = d.get<int64_t>() > 0 && elements > (int64_t{1} << 40) / d.get<int64_t>()
                   ? (int64_t{1} << 40)
                   : elements * d.get<int64_t>();
  }
  if (auto st = CopyParameters(in, {"binary_data_size"}, tensor->mutable_parameters()); !st.ok()) {
    return st;
  }
  std::string* raw = out.add_raw_input_contents();
  const json* size = nullptr;
  if (auto params = in.find("parameters"); params != in.end() && params->is_object()) {
    if (auto s = params->find("binary_data_size"); s != params->end()) size = &*s;
  }
  if (size != nullptr) {
    if (!size->is_number_unsigned()) return Invalid("binary_data_size must be a non-negative integer");
    const uint64_t n = size->get<uint64_t>();
    if (n > binary.size()) {
      return Invalid(absl::StrCat("input '", *name, "' declares ", n,
                                  " bytes of binary data but only ", binary.size(), " follow"));
    }
    raw->assign(binary.data(), n);
    binary.remove_prefix(n);
  } else {
    auto data = in.find("data");
    if (data == in.end()) return Invalid(absl::StrCat("input '", *name, "' has no data"));
    auto converted = RawFromJson(*datatype, *data);
    if (!converted.ok()) return converted.status();
    *raw = *std::move(converted);
  }
  const int bytes = ElementBytes(*datatype);
  if (bytes > 0 && static_cast<int64_t>(raw->size()) != elements * bytes) {
    return Invalid(absl::StrCat("input '", *name, "' has ", raw->size() / bytes,
                                " elements of data for shape of ", elements));
  }
  return absl::OkStatus();
}

// Output values from raw little-endian contents as JSON.
template <typename T>
void AppendValues(const std::string& raw, json& data) {
  const size_t n = raw.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, raw.data() + i * sizeof(T), sizeof(T));
    data.push_back(x);
  }
}

json JsonData(const std::string& datatype, const std::string& raw) {
  json data = json::array();
  if (datatype == "FP32") AppendValues<float>(raw, data);
  else if (datatype == "FP64") AppendValues<double>(raw, data);
  else if (datatype == "INT64") AppendValues<int64_t>(raw, data);
  else if (datatype == "INT32") AppendValues<int32_t>(raw, data);
  else if (datatype == "UINT8") AppendValues<uint8_t>(raw, data);
  else if (datatype == "BOOL") AppendValues<bool>(raw, data);
  else if (datatype == "BYTES") {
    // The server's own outputs, well formed; malformed contents give an empty array.
    if (auto elements = SplitRawBytes(raw); elements.ok()) {
      for (std::string_view e : *elements) data.push_back(std::string(e));
    }
  }
  return data;
}

}  // namespace

absl::StatusOr<ParsedInfer> ParseInferRequest(std::string_view body,
                                              std::optional<size_t> json_length) {
  const size_t length = json_length.value_or(body.size());
  if (length > body.size()) {
    return Invalid(absl::StrCat("Inference-Header-Content-Length ", length,
                                " exceeds the body's ", body.size(), " bytes"));
  }
  const json request = json::parse(body.substr(0, length), nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) return Invalid("the body is not valid JSON");
  if (!request.is_object()) return Invalid("the body must be a JSON object");
  std::string_view binary = body.substr(length);
  ParsedInfer parsed;
  kv::ModelInferRequest& out = parsed.request;
  auto id = String(request, "id", false);
  if (!id.ok()) return id.status();
  out.set_id(*id);
  if (auto st = CopyParameters(request, {"binary_data_output"}, out.mutable_parameters());
      !st.ok()) {
    return st;
  }
  parsed.binary.by_default = BoolParameter(request, "binary_data_output").value_or(false);
  auto inputs = request.find("inputs");
  if (inputs == request.end() || !inputs->is_array()) return Invalid("'inputs' must be an array");
  for (const json& in : *inputs) {
    if (absl::Status st = ParseInput(in, binary, out); !st.ok()) return st;
  }
  if (!binary.empty()) {
    return Invalid(absl::StrCat(binary.size(), " bytes of binary data follow the JSON but no "
                                "input declares them (binary_data_size)"));
  }
  auto outputs = request.find("outputs");
  if (outputs != request.end()) {
    if (!outputs->is_array()) return Invalid("'outputs' must be an array");
    for (const json& o : *outputs) {
      if (!o.is_object()) return Invalid("each output must be an object");
      auto* requested = out.add_outputs();
      auto name = String(o, "name", true);
      if (!name.ok()) return name.status();
      requested->set_name(*name);
      if (auto st = CopyParameters(o, {"binary_data"}, requested->mutable_parameters()); !st.ok()) {
        return st;
      }
      if (auto b = BoolParameter(o, "binary_data")) parsed.binary.by_name[*name] = *b;
    }
  }
  return parsed;
}

InferBody WriteInferResponse(const kv::ModelInferResponse& response, const BinaryOutputs& binary) {
  json body = json::object();
  body["model_name"] = response.model_name();
  body["model_version"] = response.model_version();
  if (!response.id().empty()) body["id"] = response.id();
  json outputs = json::array();
  std::string appended;
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& o = response.outputs(i);
    const std::string& raw = i < response.raw_output_contents_size()
                                 ? response.raw_output_contents(i)
                                 : std::string();
    json out = {{"name", o.name()}, {"datatype", o.datatype()}, {"shape", json::array()}};
    for (int64_t d : o.shape()) out["shape"].push_back(d);
    if (binary.binary(o.name())) {
      out["parameters"] = {{"binary_data_size", raw.size()}};
      appended += raw;
    } else {
      out["data"] = JsonData(o.datatype(), raw);
    }
    outputs.push_back(std::move(out));
  }
  body["outputs"] = std::move(outputs);
  InferBody result;
  result.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!appended.empty() || binary.by_default || !binary.by_name.empty()) {
    bool any_binary = false;
    for (const auto& o : response.outputs()) any_binary = any_binary || binary.binary(o.name());
    if (any_binary) {
      result.json_length = result.body.size();
      result.body += appended;
    }
  }
  return result;
}

}  // namespace gatescope
