// gatescope-client models, health and services: see commands.h.
#include <iostream>

#include "client/commands.h"
#include "client/connection.h"
#include "client/json_writer.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace gatescope::client {
namespace {

constexpr int kInfoTimeoutMs = 10000;

// The error line of a failed call that is the command's only one.
ExitCode Failed(const grpc::Status& status) {
  Report report;
  report.ServerFailure("", FromGrpc(status));
  return report.exit_code();
}

}  // namespace

absl::StatusOr<ExitCode> RunModels(const Connection& server) {
  auto stub = v1::Inference::NewStub(server.channel());
  const std::unique_ptr<grpc::ClientContext> ctx = server.NewContext(kInfoTimeoutMs);
  v1::ListModelsResponse response;
  const grpc::Status st = stub->ListModels(ctx.get(), v1::ListModelsRequest(), &response);
  if (!st.ok()) return Failed(st);
  for (const auto& m : response.models()) {
    std::cout << "{\"name\":" << JsonString(m.name()) << ",\"version\":" << JsonString(m.version())
              << ",\"ready\":" << (m.ready() ? "true" : "false")
              << ",\"task\":" << JsonString(m.task()) << "}" << std::endl;
  }
  return ExitCode::kOk;
}

absl::StatusOr<ExitCode> RunHealth(const Connection& server, const HealthOptions& options) {
  using grpc::health::v1::HealthCheckResponse;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(options.service);
  auto stub = grpc::health::v1::Health::NewStub(server.channel());
  const std::unique_ptr<grpc::ClientContext> ctx = server.NewContext(kInfoTimeoutMs);
  HealthCheckResponse response;
  const grpc::Status st = stub->Check(ctx.get(), request, &response);
  if (!st.ok()) return Failed(st);
  std::cout << "{\"service\":" << JsonString(request.service()) << ",\"status\":"
            << JsonString(HealthCheckResponse::ServingStatus_Name(response.status())) << "}"
            << std::endl;
  return response.status() == HealthCheckResponse::SERVING ? ExitCode::kOk : ExitCode::kNotServing;
}

absl::StatusOr<ExitCode> RunServices(const Connection& server) {
  namespace refl = grpc::reflection::v1alpha;
  auto stub = refl::ServerReflection::NewStub(server.channel());
  const std::unique_ptr<grpc::ClientContext> ctx = server.NewContext(kInfoTimeoutMs);
  auto stream = stub->ServerReflectionInfo(ctx.get());
  refl::ServerReflectionRequest request;
  request.set_list_services("*");
  refl::ServerReflectionResponse response;
  const bool exchanged = stream->Write(request) && stream->WritesDone() && stream->Read(&response);
  for (refl::ServerReflectionResponse extra; stream->Read(&extra);) {
  }
  const grpc::Status st = stream->Finish();
  if (!exchanged || !st.ok()) return Failed(st);
  for (const auto& service : response.list_services_response().service()) {
    std::cout << "{\"service\":" << JsonString(service.name()) << "}" << std::endl;
  }
  return ExitCode::kOk;
}

}  // namespace gatescope::client
