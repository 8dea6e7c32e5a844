// The whole server in-process, on free ports, with models from the fake loader: what
// main.cc starts, checked through real gRPC clients.
#include "server/app/server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gatescope/v1/inference.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/mocks/fake_loader.h"

namespace gatescope {
namespace {
namespace fs = std::filesystem;

constexpr char kMeta[] = R"({"task":"image_classification","input":{"shape":[1,2,2]},
  "labels":["a","b","c"],"outputs":["logits"]})";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gatescope_server_" + std::to_string(getpid()));
    fs::remove_all(root_);
    AddModel("m", "");
  }
  void TearDown() override { fs::remove_all(root_); }

  void AddModel(const std::string& name, const std::string& serving_config) {
    fs::create_directories(root_ / name / "1");
    std::ofstream(root_ / name / "1" / "model.pt") << kMeta;
    if (!serving_config.empty()) std::ofstream(root_ / name / "config.pbtxt") << serving_config;
  }

  ServerOptions Options() const {
    ServerOptions o;
    o.model_repository = root_.string();
    o.grpc_port = 0;
    o.metrics_port = 0;
    o.torch_threads = 1;
    return o;
  }

  static std::shared_ptr<grpc::Channel> Connect(int port) {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                               grpc::InsecureChannelCredentials());
  }

  fs::path root_;
  testing::FakeLoader loader_;
};

template <typename Call>
grpc::Status WithDeadline(Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return call(&ctx);
}

TEST_F(ServerTest, StartsOnFreePortsServesBothApisAndDrains) {
  auto server = Server::Start(Options(), {&loader_, nullptr});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->grpc_port(), 0);
  ASSERT_GT((*server)->metrics_port(), 0);
  auto channel = Connect((*server)->grpc_port());

  auto v1_stub = v1::Inference::NewStub(channel);
  v1::PredictRequest predict;
  predict.set_model_name("m");
  predict.mutable_tensor()->set_dtype(v1::Tensor::UINT8);
  predict.mutable_tensor()->add_shape(2);
  predict.mutable_tensor()->add_shape(2);
  predict.mutable_tensor()->set_data(std::string(4, '\xff'));
  v1::PredictResponse response;
  ASSERT_TRUE(WithDeadline([&](auto* c) { return v1_stub->Predict(c, predict, &response); }).ok());
  ASSERT_EQ(response.classes_size(), 3);
  EXPECT_EQ(response.classes(0).label(), "c");  // the fake's logits grow with the class
  EXPECT_EQ(response.model_version(), "1");

  auto kserve = ::inference::GRPCInferenceService::NewStub(channel);
  ::inference::ModelConfigRequest config_request;
  config_request.set_name("m");
  ::inference::ModelConfigResponse config;
  ASSERT_TRUE(WithDeadline([&](auto* c) { return kserve->ModelConfig(c, config_request, &config); }).ok());
  ASSERT_EQ(config.config().instance_group_size(), 1);
  EXPECT_EQ(config.config().instance_group(0).kind(), ::inference::ModelInstanceGroup::KIND_CPU);

  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckResponse status;
  ASSERT_TRUE(WithDeadline([&](auto* c) {
    return health->Check(c, grpc::health::v1::HealthCheckRequest(), &status);
  }).ok());
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  (*server)->Shutdown();
  (*server)->Wait();  // returns: the drain is over
  (*server)->Shutdown();  // idempotent
  EXPECT_FALSE(WithDeadline([&](auto* c) { return v1_stub->Predict(c, predict, &response); }).ok());
}

TEST_F(ServerTest, AGpuModelIsUnavailableWithItsReasonAndTheOthersServe) {
  AddModel("on_gpu", "instance_group { kind: KIND_GPU gpus: [0] }");
  auto server = Server::Start(Options(), {&loader_, nullptr});
  ASSERT_TRUE(server.ok()) << server.status();
  auto kserve = ::inference::GRPCInferenceService::NewStub(Connect((*server)->grpc_port()));
  ::inference::RepositoryIndexResponse index;
  ASSERT_TRUE(WithDeadline([&](auto* c) {
    return kserve->RepositoryIndex(c, ::inference::RepositoryIndexRequest(), &index);
  }).ok());
  ASSERT_EQ(index.models_size(), 2);
  EXPECT_EQ(index.models(0).name(), "m");
  EXPECT_EQ(index.models(0).state(), "READY");
  EXPECT_EQ(index.models(1).name(), "on_gpu");
  EXPECT_EQ(index.models(1).state(), "UNAVAILABLE");
  EXPECT_NE(index.models(1).reason().find("GPU 0"), std::string::npos);
  ::inference::ModelInferRequest infer;
  infer.set_model_name("on_gpu");
  ::inference::ModelInferResponse out;
  const grpc::Status st = WithDeadline([&](auto* c) { return kserve->ModelInfer(c, infer, &out); });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ServerTest, RefusesBadOptionsAndAMissingRepository) {
  ServerOptions bad = Options();
  bad.grpc_port = 70000;
  EXPECT_EQ(Server::Start(bad, {&loader_, nullptr}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ServerOptions missing = Options();
  missing.model_repository = (root_ / "nope").string();
  EXPECT_EQ(Server::Start(missing, {&loader_, nullptr}).status().code(),
            absl::StatusCode::kNotFound);
  ServerOptions ops = Options();
  ops.ops_library = (root_ / "libnope.so").string();
  EXPECT_EQ(Server::Start(ops, {&loader_, nullptr}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServerTest, APortInUseIsRefusedNotShared) {
  auto first = Server::Start(Options(), {&loader_, nullptr});
  ASSERT_TRUE(first.ok()) << first.status();
  ServerOptions same = Options();
  same.grpc_port = (*first)->grpc_port();
  auto second = Server::Start(same, {&loader_, nullptr});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  (*first)->Shutdown();
}

// A KServe request of `batch` UINT8 [1, 2, 2] examples for model `name`.
::inference::ModelInferRequest Examples(const std::string& name, int batch) {
  ::inference::ModelInferRequest r;
  r.set_model_name(name);
  auto* in = r.add_inputs();
  in->set_name("input");
  in->set_datatype("UINT8");
  for (int64_t d : {int64_t{batch}, int64_t{1}, int64_t{2}, int64_t{2}}) in->add_shape(d);
  r.add_raw_input_contents(std::string(static_cast<size_t>(4 * batch), '\1'));
  return r;
}

TEST_F(ServerTest, KServeBatchesBeyondTheModelsMaxBatchSizeAreRefused) {
  AddModel("small", "max_batch_size: 2");
  auto server = Server::Start(Options(), {&loader_, nullptr});
  ASSERT_TRUE(server.ok()) << server.status();
  auto kserve = ::inference::GRPCInferenceService::NewStub(Connect((*server)->grpc_port()));
  ::inference::ModelInferResponse out;
  auto two = Examples("small", 2);
  ASSERT_TRUE(WithDeadline([&](auto* c) { return kserve->ModelInfer(c, two, &out); }).ok());
  EXPECT_EQ(out.outputs(0).shape(0), 2);
  auto three = Examples("small", 3);
  const grpc::Status st = WithDeadline([&](auto* c) { return kserve->ModelInfer(c, three, &out); });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("max_batch_size 2"), std::string::npos);
}

}  // namespace
}  // namespace gatescope
