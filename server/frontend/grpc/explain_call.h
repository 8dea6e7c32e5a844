// What every explain request does around a model, for both APIs: check the options
// against the model's declared maps and the server's byte cap, and wire a work item to a
// per-request ExplanationBuilder that folds the model's maps layer by layer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/batching/scheduler.h"
#include "server/explain/explanation.h"
#include "server/repository/model_repository.h"

namespace gatescope {

// Default cap on the bytes one explain request may hold (ExplanationBuilder::PeakBytes).
inline constexpr int64_t kDefaultExplainMaxBytes = int64_t{256} << 20;

// The map layout a model's metadata declares.
MapLayout LayoutOf(const ModelConfig& config);

// INVALID_ARGUMENT for options the model cannot serve; RESOURCE_EXHAUSTED when the
// request's peak bytes exceed `max_bytes`. Cheap; runs on the gRPC thread.
absl::StatusOr<std::shared_ptr<ExplanationBuilder>> StartExplanation(
    const ServedModel& model, const ExplainOptions& options, int64_t max_bytes);

// Makes `item` run the model's explanation pass, feeding each layer to `builder`. The
// builder is shared with the item's `done`, which calls Finish().
void AttachExplanation(std::shared_ptr<ExplanationBuilder> builder, int layers, WorkItem& item);

// An explanation as named tensors, for APIs that return outputs by name (KServe):
// "rollout" [gh, gw], "gates" [L, H, gh, gw], "resonance" [L, H, gh, gw], "vigilance"
// [L, H], "attention" and "attention_resonance" [layers asked, H, N, N], "plug_gates"
// [L, queries, N]; absent if not asked.
NamedTensors ExplanationTensors(const Explanation& explanation);

// The names ExplanationTensors can produce.
bool IsExplanationOutput(const std::string& name);

}  // namespace gatescope
