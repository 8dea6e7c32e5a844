// gatescope.v1 requests on detection models (task object_detection): the detections of
// Predict and Explain, and Explain's per-detection maps, which a DetectionMapCollector
// gathers instead of the classifiers' ExplanationBuilder.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "gatescope/v1/inference.pb.h"
#include "server/frontend/grpc/model_call.h"
#include "server/postprocess/detection.h"
#include "server/preprocess/normalize.h"

namespace gatescope {

// A request's detection options (`score_threshold` unset: nullopt). INVALID_ARGUMENT for
// values ResolveDetectionOptions refuses, or when a model that is not a detector gets
// either field; for such models the result is unused.
absl::StatusOr<DetectionOptions> RequestDetectionOptions(const ModelConfig& config,
                                                         std::optional<float> score_threshold,
                                                         int64_t max_detections);

// RequestDetectionOptions of a gatescope.v1 PredictRequest or ExplainRequest.
template <typename Request>
absl::StatusOr<DetectionOptions> DetectionOptionsOf(const ModelConfig& config,
                                                    const Request& request) {
  return RequestDetectionOptions(config,
                                 request.has_score_threshold()
                                     ? std::optional<float>(request.score_threshold())
                                     : std::nullopt,
                                 request.max_detections());
}

// Decodes one example's outputs for an input of `size` (DecodeDetections). INTERNAL for
// missing outputs or shapes other than the config declares: "logits" [queries, labels],
// "boxes" [queries, 4].
absl::StatusOr<std::vector<Detection>> DetectionsOf(const NamedTensors& outputs, ImageSize size,
                                                    const DetectionOptions& options,
                                                    const ModelConfig& config);

// DetectionsOf, appended to `out` with the config's labels. Returns the detections.
absl::StatusOr<std::vector<Detection>> FillDetections(
    const NamedTensors& outputs, ImageSize size, const DetectionOptions& options,
    const ModelConfig& config, google::protobuf::RepeatedPtrField<::gatescope::v1::Detection>* out);

// Serves Explain on a detection model: checks the request (INVALID_ARGUMENT for the other
// tasks' options), queues one explanation pass and finishes `call` from the worker (or at
// once on error). `context`, `request` and `response` belong to the call and outlive it.
void ExplainDetection(grpc::CallbackServerContext* context, const ModelCall& call,
                      const ::gatescope::v1::ExplainRequest* request,
                      ::gatescope::v1::ExplainResponse* response, int64_t max_bytes);

}  // namespace gatescope
