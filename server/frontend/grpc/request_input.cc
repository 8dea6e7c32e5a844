#include "server/frontend/grpc/request_input.h"

#include <vector>

#include "server/preprocess/image.h"

namespace gatescope {

absl::Status CheckInput(bool has_input, bool is_image, const std::string& image,
                        const v1::Tensor& tensor) {
  if (!has_input) return absl::InvalidArgumentError("request has no input (set image or tensor)");
  if (is_image && image.empty()) return absl::InvalidArgumentError("image is empty");
  if (!is_image && tensor.dtype() != v1::Tensor::UINT8 && tensor.dtype() != v1::Tensor::FLOAT32) {
    return absl::InvalidArgumentError("tensor.dtype must be UINT8 or FLOAT32");
  }
  return absl::OkStatus();
}

const char* ClassifierExplainOption(const v1::ExplainRequest& r) {
  const auto& ro = r.rollout_options();
  const bool rollout_options = !ro.head_fusion().empty() || !ro.signed_maps().empty() ||
                               ro.discard_ratio() != 0 || ro.start_layer() != 0;
  if (r.rollout() || rollout_options) return "rollout";
  if (r.attention_layers_size() || r.attention_heads_size() || r.attention_queries_size()) {
    return "attention_layers / attention_heads / attention_queries";
  }
  if (r.resonance()) return "resonance";
  if (r.heatmap_png()) return "heatmap_png";
  return nullptr;
}

WorkItem ExplainPassItem(const v1::ExplainRequest* request, std::shared_ptr<ServedModel> model,
                         std::shared_ptr<ImageSize> size, LayerMapsVisitor visit) {
  const bool is_image = request->input_case() == v1::ExplainRequest::kImage;
  WorkItem item;
  item.shape_key = 1;  // never formed into a batch with predictions
  item.explain_layers = model->config.layers();
  item.make_input = [request, model = std::move(model), is_image, size = std::move(size)] {
    return MakeInput(is_image, request->image(), request->tensor(), model->config.input(),
                     size.get());
  };
  item.explain_layer = std::move(visit);
  return item;
}

absl::StatusOr<at::Tensor> MakeInput(bool is_image, const std::string& image,
                                     const v1::Tensor& tensor, const InputSpec& spec,
                                     ImageSize* output_size) {
  if (is_image) return DecodeImage(image, spec, output_size);
  const std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
  return PixelsToTensor(
      tensor.data(), tensor.dtype() == v1::Tensor::UINT8 ? PixelType::kUint8 : PixelType::kFloat32,
      shape, spec, output_size);
}

}  // namespace gatescope
