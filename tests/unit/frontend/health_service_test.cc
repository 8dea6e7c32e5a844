// grpc.health.v1 as gatescope serves it, over a real in-process gRPC server on loopback:
// Check and Watch semantics of the protocol, coalesced updates, cancellation, shutdown that
// ends Watch streams at once, and tokens when health is not exempt.
#include "server/frontend/grpc/health_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

namespace gatescope {
namespace {

namespace hv1 = ::grpc::health::v1;
using Status = hv1::HealthCheckResponse;

class HealthServiceTest : public ::testing::Test {
 protected:
  void Start(const AccessControl* access = nullptr) {
    service_ = std::make_unique<HealthService>(access);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = hv1::Health::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                                     grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) {  // (a test that shut it down resets it)
      service_->Shutdown();
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
  }

  grpc::Status Check(const std::string& service, Status* response,
                     const std::string& token = "") {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    hv1::HealthCheckRequest request;
    request.set_service(service);
    return stub_->Check(&context, request, response);
  }

  std::unique_ptr<HealthService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<hv1::Health::Stub> stub_;
  int port_ = 0;
};

TEST_F(HealthServiceTest, CheckAnswersTheSetStatusAndNotFoundForUnknownNames) {
  Start();
  Status response;
  EXPECT_EQ(Check("", &response).error_code(), grpc::StatusCode::NOT_FOUND);
  service_->SetServingStatus("", true);
  service_->SetServingStatus("model", false);
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), Status::SERVING);
  ASSERT_TRUE(Check("model", &response).ok());
  EXPECT_EQ(response.status(), Status::NOT_SERVING);
  const grpc::Status unknown = Check("other", &response);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_message(), "unknown service 'other'");
  service_->Shutdown();
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), Status::NOT_SERVING);
  service_->SetServingStatus("", true);  // ignored after shutdown
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), Status::NOT_SERVING);
}

TEST_F(HealthServiceTest, WatchSendsTheCurrentStatusThenChangesAndEndsAtShutdown) {
  Start();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  hv1::HealthCheckRequest request;
  request.set_service("model");
  auto reader = stub_->Watch(&context, request);
  Status response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), Status::SERVICE_UNKNOWN);
  service_->SetServingStatus("model", true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), Status::SERVING);
  service_->SetServingStatus("other", false);  // another name: nothing sent here
  service_->SetServingStatus("model", true);   // unchanged: nothing sent
  service_->SetServingStatus("model", false);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), Status::NOT_SERVING);
  service_->SetServingStatus("model", true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), Status::SERVING);
  const auto start = std::chrono::steady_clock::now();
  service_->Shutdown();
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), Status::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(HealthServiceTest, RapidChangesAreCoalescedAndTheLastOneArrives) {
  Start();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  hv1::HealthCheckRequest request;  // "": the server
  auto reader = stub_->Watch(&context, request);
  Status response;
  ASSERT_TRUE(reader->Read(&response));  // SERVICE_UNKNOWN: the stream is open
  std::thread a([&] { for (int i = 0; i < 2000; ++i) service_->SetServingStatus("", i % 2); });
  std::thread b([&] { for (int i = 0; i < 2000; ++i) service_->SetServingStatus("x", i % 2); });
  a.join();
  b.join();
  service_->SetServingStatus("", true);
  int messages = 0;
  Status::ServingStatus last = Status::SERVICE_UNKNOWN;
  while (reader->Read(&response)) {  // until the deadline ends the stream
    ++messages;
    last = response.status();
  }
  EXPECT_EQ(last, Status::SERVING);
  EXPECT_LE(messages, 2001);
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// A client that stops reading while statuses flip does not hold the server's shutdown: open
// streams are finished at once, with NOT_SERVING as their last message.
TEST_F(HealthServiceTest, ShutdownEndsWatchesOfClientsThatDoNotRead) {
  Start();
  grpc::ClientContext context;
  hv1::HealthCheckRequest request;
  auto reader = stub_->Watch(&context, request);
  Status response;
  ASSERT_TRUE(reader->Read(&response));  // the stream is open on the server
  for (int i = 0; i < 200; ++i) service_->SetServingStatus("", i % 2 == 0);
  const auto start = std::chrono::steady_clock::now();
  service_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  Status::ServingStatus last = Status::UNKNOWN;
  while (reader->Read(&response)) last = response.status();
  EXPECT_EQ(last, Status::NOT_SERVING);
  EXPECT_TRUE(reader->Finish().ok());
  server_.reset();  // already shut down
}

TEST_F(HealthServiceTest, CancelledWatchesAreForgotten) {
  Start();
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext context;
    hv1::HealthCheckRequest request;
    auto reader = stub_->Watch(&context, request);
    Status response;
    ASSERT_TRUE(reader->Read(&response));
    context.TryCancel();
    while (reader->Read(&response)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
    service_->SetServingStatus("", i % 2 == 0);  // reaches no stale watcher (ASan would say)
  }
  Status response;
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), Status::NOT_SERVING);
}

TEST_F(HealthServiceTest, TokensAreNeededWhenHealthIsNotExempt) {
  const std::string path = ::testing::TempDir() + "/health_tokens";
  std::ofstream(path) << "health-token-0123456789\n";
  AccessOptions options;
  options.tokens_file = path;
  options.exempt = {};
  auto access = AccessControl::Load(options);
  ASSERT_TRUE(access.ok()) << access.status();
  Start(access->get());
  service_->SetServingStatus("", true);
  Status response;
  EXPECT_EQ(Check("", &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Check("", &response, "wrong-token-0123456789").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(Check("", &response, "health-token-0123456789").ok());
  EXPECT_EQ(response.status(), Status::SERVING);
  grpc::ClientContext context;
  hv1::HealthCheckRequest request;
  auto reader = stub_->Watch(&context, request);
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace gatescope
