// Collects the per-example outputs of one KServe ModelInfer call and builds its response
// once every example has finished. Shared by the call's jobs; thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "inference/grpc_service.pb.h"
#include "server/runtime/named_tensors.h"

namespace gatescope {

// What the model declares about its outputs, for the response.
struct OutputDeclaration {
  std::vector<std::string> order;   // outputs sent when the request names none, in order
  std::vector<std::string> labels;  // class names for the classification extension; may be empty
};

// The classification extension's class count asked of a requested output: its
// "classification" parameter (int64 or uint64, >= 1); 0 when absent; INVALID_ARGUMENT
// when malformed.
absl::StatusOr<int64_t> ClassCount(
    const ::inference::ModelInferRequest::InferRequestedOutputTensor& output);

class InferResults {
 public:
  // `request` and `response` must outlive the last Complete. `done` finishes the call; it
  // is called exactly once, on the thread of the last Complete.
  InferResults(const ::inference::ModelInferRequest* request,
               ::inference::ModelInferResponse* response, std::function<void(absl::Status)> done,
               OutputDeclaration declared = {});

  // The number of examples; call once, before any Store or Complete.
  void Expect(size_t examples);

  // Example `i`'s outputs (batch dim removed), before its Complete.
  void Store(size_t i, NamedTensors outputs);

  // True once an example has failed: the call's answer is an error, so its examples still
  // queued need not run. Thread-safe.
  bool failed() const { return failed_.load(); }

  // Example `i` has finished with `status`. The last one appends the outputs the request
  // names (when it names none: the declared order, then any other of example 0's by name)
  // stacked over the examples, or the first error, and calls `done`. An output asked for
  // with "classification": k comes back as Triton's classification extension: BYTES
  // [B, k], "score:index[:label]" strings, highest score first. Call once per example.
  void Complete(size_t i, absl::Status status);

 private:
  absl::Status BuildResponse() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ::inference::ModelInferRequest* const request_;
  ::inference::ModelInferResponse* const response_;
  const std::function<void(absl::Status)> done_;
  const OutputDeclaration declared_;
  absl::Mutex mu_;
  std::vector<std::optional<NamedTensors>> results_ ABSL_GUARDED_BY(mu_);
  size_t remaining_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
};

}  // namespace gatescope
