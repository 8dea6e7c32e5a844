// gatescope.v1 requests on segmentation models (task image_segmentation): the
// Segmentation message of Predict and Explain, and Explain's per-stage maps, which are
// collected by a DenseMapCollector instead of the classifiers' ExplanationBuilder.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "gatescope/v1/inference.pb.h"
#include "server/explain/dense_maps.h"
#include "server/frontend/grpc/model_call.h"
#include "server/postprocess/segmentation.h"
#include "server/preprocess/normalize.h"

namespace gatescope {

// Fills `out` (mask, class_pixels; the PNG and probabilities as `options` ask) from one
// example's outputs ("logits" [classes, H, W]) mapped to `size`. INTERNAL when the logits
// are missing or malformed.
absl::Status FillSegmentation(const NamedTensors& outputs, ImageSize size,
                              const SegmentationOptions& options,
                              ::gatescope::v1::Segmentation* out);

// The model's query point for `pixel` of an input of `size`: {(y + 0.5) / H0,
// (x + 0.5) / W0}, each in (0, 1). INVALID_ARGUMENT when the pixel is outside the input.
absl::StatusOr<std::vector<double>> QueryPoint(const ::gatescope::v1::QueryPixel& pixel,
                                               ImageSize size);

// The map layout a segmentation model's metadata declares.
DenseMapLayout DenseLayoutOf(const ModelConfig& config);

// Serves Explain on a segmentation model: checks the request (INVALID_ARGUMENT for the
// classifiers' options, RESOURCE_EXHAUSTED over `max_bytes`), queues one explanation pass
// and finishes `call` from the worker (or at once on error). `context`, `request` and
// `response` belong to the call and outlive it.
void ExplainSegmentation(grpc::CallbackServerContext* context, const ModelCall& call,
                         const ::gatescope::v1::ExplainRequest* request,
                         ::gatescope::v1::ExplainResponse* response, int64_t max_bytes);

}  // namespace gatescope
