#include "client/connection.h"

namespace gatescope::client {
namespace {

// `method` of `stub` on `request` with a deadline `timeout_ms` from now.
template <typename Request, typename Response>
absl::StatusOr<Response> Call(v1::Inference::Stub& stub,
                              grpc::Status (v1::Inference::Stub::*method)(grpc::ClientContext*,
                                                                          const Request&,
                                                                          Response*),
                              const Request& request, int timeout_ms) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(timeout_ms));
  Response response;
  if (const grpc::Status st = (stub.*method)(&ctx, request, &response); !st.ok()) {
    return FromGrpc(st);
  }
  return response;
}

}  // namespace

std::shared_ptr<grpc::Channel> OpenChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(16 << 20);
  args.SetMaxReceiveMessageSize(256 << 20);  // explanations with many layers are large
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::chrono::system_clock::time_point DeadlineAfter(int timeout_ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
}

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::StatusOr<v1::ModelConfig> FetchModelConfig(v1::Inference::Stub& stub,
                                                 const ModelTarget& target) {
  v1::ModelMetadataRequest request;
  request.set_model_name(target.model);
  request.set_model_version(target.version);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(10000));
  v1::ModelMetadataResponse response;
  if (const grpc::Status st = stub.GetModelMetadata(&ctx, request, &response); !st.ok()) {
    return FromGrpc(st);
  }
  if (!response.ready()) {
    return absl::UnavailableError("model '" + response.name() + "' version '" + response.version() +
                                  "' is not ready");
  }
  return response.config();
}

absl::StatusOr<v1::PredictResponse> CallPredict(v1::Inference::Stub& stub,
                                                const v1::PredictRequest& request, int timeout_ms) {
  return Call(stub, &v1::Inference::Stub::Predict, request, timeout_ms);
}

absl::StatusOr<v1::ExplainResponse> CallExplain(v1::Inference::Stub& stub,
                                                const v1::ExplainRequest& request, int timeout_ms) {
  return Call(stub, &v1::Inference::Stub::Explain, request, timeout_ms);
}

}  // namespace gatescope::client
