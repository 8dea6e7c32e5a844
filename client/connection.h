// Channels, deadlines and metadata shared by the commands. Every call here blocks.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/options.h"
#include "gatescope/v1/inference.grpc.pb.h"

namespace gatescope::client {

// An insecure channel to `address` that takes large explanations. Connects lazily.
std::shared_ptr<grpc::Channel> OpenChannel(const std::string& address);

// The deadline `timeout_ms` from now.
std::chrono::system_clock::time_point DeadlineAfter(int timeout_ms);

// The same code and message as an absl::Status (the code numbers agree).
absl::Status FromGrpc(const grpc::Status& status);

// The config of `target`'s model from GetModelMetadata (10 s deadline). The server's
// error when the call fails; UNAVAILABLE when the model is known but not ready (it failed
// to load, or is loading), since its metadata then cannot be trusted.
absl::StatusOr<v1::ModelConfig> FetchModelConfig(v1::Inference::Stub& stub,
                                                 const ModelTarget& target);

// Predict and Explain with a deadline `timeout_ms` from now; the server's error (or the
// deadline's) when the call fails.
absl::StatusOr<v1::PredictResponse> CallPredict(v1::Inference::Stub& stub,
                                                const v1::PredictRequest& request, int timeout_ms);
absl::StatusOr<v1::ExplainResponse> CallExplain(v1::Inference::Stub& stub,
                                                const v1::ExplainRequest& request, int timeout_ms);

}  // namespace gatescope::client
