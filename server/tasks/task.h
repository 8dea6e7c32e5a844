// A task is what a model does (classify images, segment them, detect objects, ...) and
// everything about requests that depends on it: which request fields and parameters it
// takes, how its inputs are decoded, gathered and scattered, how its outputs fill each
// API's responses, how its explanations are collected, and what it declares to KServe.
// One Task is chosen per model at load, from the metadata's `task`, through the registry
// (task_registry.h); frontends hold no per-task code. Tasks are immutable after creation
// and thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gatescope/v1/inference.pb.h"
#include "inference/grpc_service.pb.h"
#include "inference/model_config.pb.h"
#include "server/api/infer_results.h"
#include "server/config/model_config.h"
#include "server/tasks/batch_assembly.h"
#include "server/tasks/inference_job.h"

namespace gatescope {

// Finishes a gatescope.v1 call with its outcome (OK: the response was written). Called
// exactly once, on a worker thread or a reply thread (ModelInstance's `replies`), or on
// the calling thread if the job is refused.
using CallDone = std::function<void(absl::Status)>;

// One KServe tensor as a model declares it (ModelMetadata / ModelConfig).
struct DeclaredTensor {
  std::string name;
  std::string datatype;         // ModelMetadata's ("FP32", "UINT8", "INT64", "BYTES")
  ::inference::DataType type;   // ModelConfig's
  std::vector<int64_t> shape;   // per example (no batch dim); -1: varies
};

struct KServeSignature {
  DeclaredTensor input;
  ::inference::ModelInput::Format format = ::inference::ModelInput::FORMAT_NONE;
  std::vector<DeclaredTensor> outputs;  // forward()'s outputs, then the task's own
};

// Reads the extra file `name` of the model's archive (its bytes; NOT_FOUND when absent),
// for a task that needs more of the archive than its metadata, e.g. a text model's
// tokenizer. Valid only while the task is created.
using ArchiveReader = std::function<absl::StatusOr<std::string>(const std::string& name)>;

// Server-wide settings tasks apply to requests.
struct TaskOptions {
  int64_t explain_max_bytes = int64_t{256} << 20;  // --explain_max_bytes
  // Largest dense prediction output of one call (segmentation masks and probabilities,
  // checked before they are allocated; a KServe call's examples share it).
  int64_t response_max_bytes = int64_t{64} << 20;  // --max_response_bytes
};

class Task : public BatchAssembly {
 public:
  // The model's metadata with this task's defaults filled in.
  virtual const ModelConfig& config() const = 0;

  // gatescope.v1 Predict and Explain: checks `request` against the model (cheap, no
  // decoding; on the gRPC thread) and returns its job, which writes `response` (all but
  // model_name and model_version) and then calls `done`. `request` and `response` must
  // outlive that call. INVALID_ARGUMENT for fields this task does not take or values out
  // of range; RESOURCE_EXHAUSTED when an explanation would pass the byte cap.
  virtual absl::StatusOr<std::unique_ptr<InferenceJob>> Predict(
      const ::gatescope::v1::PredictRequest& request,
      ::gatescope::v1::PredictResponse* response, CallDone done) const = 0;
  virtual absl::StatusOr<std::unique_ptr<InferenceJob>> Explain(
      const ::gatescope::v1::ExplainRequest& request,
      ::gatescope::v1::ExplainResponse* response, CallDone done) const = 0;

  // KServe v2 ModelInfer: one job per example of `request`'s input. Calls
  // results->Expect(n) first; job i then stores its named outputs and completes slot i.
  // Same errors as Predict, before any job exists. `request` must outlive the jobs.
  virtual absl::StatusOr<std::vector<std::unique_ptr<InferenceJob>>> Infer(
      const ::inference::ModelInferRequest& request,
      const std::shared_ptr<InferResults>& results) const = 0;

  // The input and every output ModelInfer may return.
  virtual KServeSignature Signature() const = 0;
};

}  // namespace gatescope
