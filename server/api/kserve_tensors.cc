#include "server/api/kserve_tensors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/stack.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gatescope {
namespace {

using ::inference::ModelInferRequest;

absl::Status ReadBytes(const ModelInferRequest& request, KServeInput& in) {
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw) {
    auto split = SplitRawBytes(request.raw_input_contents(0));
    if (!split.ok()) return split.status();
    in.elements = *std::move(split);
  } else {
    for (const auto& b : request.inputs(0).contents().bytes_contents()) in.elements.emplace_back(b);
  }
  return absl::OkStatus();
}

absl::Status ReadNumbers(const ModelInferRequest& request, KServeInput& in) {
  const auto& contents = request.inputs(0).contents();
  if (request.raw_input_contents_size() > 0) {
    in.data = request.raw_input_contents(0);
  } else if (in.datatype == "FP32") {
    const auto& v = contents.fp32_contents();
    in.owned = std::make_shared<std::string>(reinterpret_cast<const char*>(v.data()),
                                             v.size() * sizeof(float));
  } else {
    const auto& v = contents.uint_contents();
    auto owned = std::make_shared<std::string>(v.size(), '\0');
    for (int i = 0; i < v.size(); ++i) {
      if (v[i] > 255) return InvalidInfer("UINT8 contents out of range");
      (*owned)[i] = static_cast<char>(v[i]);
    }
    in.owned = std::move(owned);
  }
  if (in.owned) in.data = *in.owned;
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckBytesBatch(const KServeInput& input) {
  const auto& shape = input.shape;
  if (!(shape.size() == 1 || (shape.size() == 2 && shape[1] == 1))) {
    return InvalidInfer("BYTES input must have shape [B] or [B, 1]");
  }
  if (static_cast<int64_t>(input.elements.size()) != shape[0]) {
    return InvalidInfer(absl::StrCat("BYTES input has ", input.elements.size(),
                                     " elements, shape says ", shape[0]));
  }
  return absl::OkStatus();
}

absl::Status InvalidInfer(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("ModelInfer: ", what));
}

absl::StatusOr<KServeInput> ReadSingleInput(const ModelInferRequest& request) {
  if (request.inputs_size() != 1) return InvalidInfer("exactly one input tensor expected");
  if (request.raw_input_contents_size() > 1) {
    return InvalidInfer("raw_input_contents must have one entry per input");
  }
  const auto& input = request.inputs(0);
  KServeInput in;
  in.datatype = input.datatype();
  in.shape.assign(input.shape().begin(), input.shape().end());
  for (int64_t d : in.shape) {
    if (d < 0) return InvalidInfer("negative dimension in input shape");
  }
  if (in.datatype == "BYTES") {
    if (absl::Status st = ReadBytes(request, in); !st.ok()) return st;
    return in;
  }
  if (in.datatype != "FP32" && in.datatype != "UINT8") {
    return InvalidInfer(absl::StrCat("unsupported datatype '", in.datatype,
                                     "' (FP32, UINT8 or BYTES)"));
  }
  if (absl::Status st = ReadNumbers(request, in); !st.ok()) return st;
  return in;
}

std::string KServeDatatype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return "FP32";
    case at::kDouble: return "FP64";
    case at::kLong: return "INT64";
    case at::kInt: return "INT32";
    case at::kByte: return "UINT8";
    case at::kBool: return "BOOL";
    default: return "FP32";
  }
}

absl::Status AppendOutput(const std::string& name, const std::vector<at::Tensor>& rows,
                          ::inference::ModelInferResponse* response) {
  if (rows.empty()) return absl::InternalError("no rows for output " + name);
  for (const at::Tensor& r : rows) {
    if (r.sizes() != rows.front().sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", name, "' differs in shape between examples (inputs of different "
          "sizes); send them in separate requests"));
    }
  }
  at::Tensor stacked = at::stack(rows);
  const std::string datatype = KServeDatatype(stacked);
  if (datatype == "FP32" && stacked.scalar_type() != at::kFloat) stacked = stacked.to(at::kFloat);
  stacked = stacked.contiguous();
  auto* out = response->add_outputs();
  out->set_name(name);
  out->set_datatype(datatype);
  for (int64_t d : stacked.sizes()) out->add_shape(d);
  response->add_raw_output_contents(static_cast<const char*>(stacked.data_ptr()),
                                    stacked.nbytes());
  return absl::OkStatus();
}

absl::Status AppendClassification(const std::string& name, const std::vector<at::Tensor>& rows,
                                  int64_t k, const std::vector<std::string>& labels,
                                  ::inference::ModelInferResponse* response) {
  if (rows.empty()) return absl::InternalError("no rows for output " + name);
  const int64_t count = std::min<int64_t>(k, rows.front().numel());
  std::string raw;
  for (const at::Tensor& r : rows) {
    if (r.numel() != rows.front().numel()) {
      return absl::InvalidArgumentError(
          absl::StrCat("output '", name, "' differs in size between examples"));
    }
    const at::Tensor flat = r.reshape({-1}).to(at::kDouble);
    const auto top = flat.topk(count);
    const at::Tensor values = std::get<0>(top).contiguous();
    const at::Tensor indices = std::get<1>(top).contiguous();
    for (int64_t j = 0; j < count; ++j) {
      const int64_t index = indices.data_ptr<int64_t>()[j];
      // Triton's spelling: the score with six decimals, the index, the label if any.
      std::string element = absl::StrCat(absl::StrFormat("%f", values.data_ptr<double>()[j]),
                                         ":", index);
      if (index < static_cast<int64_t>(labels.size())) absl::StrAppend(&element, ":", labels[index]);
      AppendBytesElement(element, raw);
    }
  }
  auto* out = response->add_outputs();
  out->set_name(name);
  out->set_datatype("BYTES");
  out->add_shape(static_cast<int64_t>(rows.size()));
  out->add_shape(count);
  response->add_raw_output_contents(std::move(raw));
  return absl::OkStatus();
}

}  // namespace gatescope
