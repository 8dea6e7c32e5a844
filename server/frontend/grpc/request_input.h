// The image-or-tensor input of gatescope.v1 Predict and Explain requests: a cheap check on
// the gRPC thread, and the conversion to the model's input on the worker thread.
#pragma once

#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "gatescope/v1/inference.pb.h"
#include "server/batching/scheduler.h"
#include "server/config/model_config.h"
#include "server/repository/model_repository.h"
#include "server/preprocess/normalize.h"

namespace gatescope {

// INVALID_ARGUMENT for a missing or empty input or a tensor of another dtype than UINT8 /
// FLOAT32. Does not decode.
absl::Status CheckInput(bool has_input, bool is_image, const std::string& image,
                        const ::gatescope::v1::Tensor& tensor);

// The first classifier-only explain option `r` sets (rollout or non-default
// rollout_options, attention_layers / attention_heads / attention_queries, resonance,
// heatmap_png), as the name to report, or nullptr: the options segmentation and detection
// models refuse.
const char* ClassifierExplainOption(const ::gatescope::v1::ExplainRequest& r);

// A work item for one explain pass over `request`'s input: never batched with predictions,
// its make_input writes the input's size into `size` (for `done` and explain_args, which
// run later on the same worker thread), and each of the model's `layers` explain layers
// goes to `visit`. The caller sets `done` (and explain_args). `request` and `model`
// outlive the item.
WorkItem ExplainPassItem(const ::gatescope::v1::ExplainRequest* request,
                         std::shared_ptr<ServedModel> model, std::shared_ptr<ImageSize> size,
                         LayerMapsVisitor visit);

// Builds the model input from the encoded image (is_image) or the pixel tensor; see
// DecodeImage / PixelsToTensor, including `output_size`. CPU-bound: call it on the worker.
absl::StatusOr<at::Tensor> MakeInput(bool is_image, const std::string& image,
                                     const ::gatescope::v1::Tensor& tensor, const InputSpec& spec,
                                     ImageSize* output_size = nullptr);

}  // namespace gatescope
