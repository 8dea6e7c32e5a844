#include "server/frontend/grpc/kserve_codec.h"

#include <ATen/ATen.h>

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/preprocess/image.h"

namespace gatescope {
namespace {

using ::inference::ModelInferRequest;

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("ModelInfer: ", what));
}

// Splits raw BYTES contents (uint32 length + bytes, repeated) into elements.
absl::StatusOr<std::vector<std::string_view>> SplitRawBytes(const std::string& raw) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    if (raw.size() - pos < 4) return Invalid("truncated BYTES element length");
    uint32_t len = 0;
    std::memcpy(&len, raw.data() + pos, 4);
    pos += 4;
    if (raw.size() - pos < len) return Invalid("truncated BYTES element");
    out.emplace_back(raw.data() + pos, len);
    pos += len;
  }
  return out;
}

int64_t Product(const std::vector<int64_t>& v, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

}  // namespace

absl::StatusOr<std::vector<ExampleMaker>> SplitInferInputs(const ModelInferRequest& request,
                                                           const InputSpec& spec) {
  if (request.inputs_size() != 1) return Invalid("exactly one input tensor expected");
  const auto& input = request.inputs(0);
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != 1) {
    return Invalid("raw_input_contents must have one entry per input");
  }
  std::vector<int64_t> shape(input.shape().begin(), input.shape().end());
  for (int64_t d : shape) {
    if (d < 0) return Invalid("negative dimension in input shape");
  }
  const std::vector<int64_t> model(spec.shape().begin(), spec.shape().end());  // C,H,W
  std::vector<ExampleMaker> makers;

  if (input.datatype() == "BYTES") {
    if (!(shape.size() == 1 || (shape.size() == 2 && shape[1] == 1))) {
      return Invalid("BYTES input must have shape [B] or [B, 1]");
    }
    std::vector<std::string_view> items;
    if (raw) {
      auto split = SplitRawBytes(request.raw_input_contents(0));
      if (!split.ok()) return split.status();
      items = *std::move(split);
    } else {
      for (const auto& b : input.contents().bytes_contents()) items.emplace_back(b);
    }
    if (static_cast<int64_t>(items.size()) != shape[0]) {
      return Invalid(absl::StrCat("BYTES input has ", items.size(), " elements, shape says ",
                                  shape[0]));
    }
    for (std::string_view item : items) {
      makers.push_back([item, &spec](ImageSize* size) { return DecodeImage(item, spec, size); });
    }
    return makers;
  }

  const bool fp32 = input.datatype() == "FP32";
  if (!fp32 && input.datatype() != "UINT8") {
    return Invalid(absl::StrCat("unsupported datatype '", input.datatype(),
                                "' (FP32, UINT8 or BYTES)"));
  }
  // Normalise the shape to [B, C, H, W].
  if (fp32 && shape.size() == 3) shape.insert(shape.begin(), 1);
  if (!fp32 && shape.size() == 3 && model[0] == 1) shape.insert(shape.begin() + 1, 1);
  const bool any_size = spec.any_size();
  const bool matches = shape.size() == 4 &&
                       (any_size ? shape[1] == model[0]
                                 : std::vector<int64_t>(shape.begin() + 1, shape.end()) == model);
  if (!matches) {
    return Invalid(absl::StrCat("input shape [", absl::StrJoin(input.shape(), ","),
                                "] does not match the model input [B,",
                                any_size ? absl::StrCat(model[0], ",H,W")
                                         : absl::StrJoin(model, ","),
                                "]"));
  }
  if (any_size) {
    if (absl::Status st = CheckInputSize({shape[2], shape[3]}, spec, "input"); !st.ok()) {
      return Invalid(std::string(st.message()));
    }
  }
  const std::vector<int64_t> example(shape.begin() + 1, shape.end());
  const int64_t batch = shape[0], per = Product(shape, 1);
  const size_t elem = fp32 ? 4 : 1;
  // Bytes of the whole tensor, viewed without copying when sent raw.
  std::shared_ptr<std::string> owned;
  std::string_view data;
  if (raw) {
    data = request.raw_input_contents(0);
  } else if (fp32) {
    const auto& v = input.contents().fp32_contents();
    owned = std::make_shared<std::string>(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    data = *owned;
  } else {
    const auto& v = input.contents().uint_contents();
    owned = std::make_shared<std::string>(v.size(), '\0');
    for (int i = 0; i < v.size(); ++i) {
      if (v[i] > 255) return Invalid("UINT8 contents out of range");
      (*owned)[i] = static_cast<char>(v[i]);
    }
    data = *owned;
  }
  // Divide rather than multiply: dimensions come from the client and could overflow.
  const size_t example_bytes = static_cast<size_t>(per) * elem;
  if (batch == 0 || data.size() % example_bytes != 0 ||
      data.size() / example_bytes != static_cast<size_t>(batch)) {
    return Invalid(absl::StrCat("input has ", data.size(), " bytes, shape needs ", batch,
                                " x ", example_bytes));
  }
  for (int64_t b = 0; b < batch; ++b) {
    std::string_view slice = data.substr(b * per * elem, per * elem);
    if (fp32 && !any_size) {
      makers.push_back([slice, model, owned](ImageSize* size) -> absl::StatusOr<at::Tensor> {
        at::Tensor t = at::empty(model, at::kFloat);
        std::memcpy(t.data_ptr(), slice.data(), slice.size());
        if (size != nullptr) *size = {model[1], model[2]};
        return t;
      });
    } else {
      const PixelType type = fp32 ? PixelType::kFloat32 : PixelType::kUint8;
      makers.push_back([slice, example, owned, &spec, type](ImageSize* size) {
        return PixelsToTensor(slice, type, example, spec, size);
      });
    }
  }
  return makers;
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

}  // namespace gatescope
