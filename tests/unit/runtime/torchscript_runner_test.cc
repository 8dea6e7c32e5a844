// The TorchScript runner and loader on small modules defined here: outputs, the error
// mapping the runner promises, the explanation pass, metadata, ops and devices.
#include "server/runtime/torchscript_runner.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>

namespace gatescope {
namespace {
namespace fs = std::filesystem;

constexpr char kMeta[] = R"({"task":"image_classification"})";

class TorchScriptRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gatescope_runner_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    torch::jit::Module m("m");
    m.define(R"(
      def forward(self, x):
          if x.size(1) == 3:
              return {"logits": x.view(7)}
          return {"logits": x * 2}

      def explain_begin(self, x):
          return x

      def explain_layer(self, state, l: int):
          return state + 1, {"attention": state * l}

      def explain_end(self, state):
          return {"logits": state}
    )");
    torch::jit::ExtraFilesMap extra{{kMetadataFile, kMeta}};
    m.save((dir_ / "model.pt").string(), extra);
    torch::jit::Module bare("bare");
    bare.define("def forward(self, x):\n  return {\"logits\": x}\n");
    bare.save((dir_ / "bare.pt").string());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<ModelRunner> Cpu() {
    return loader_.Load((dir_ / "model.pt").string(), InstanceSpec{}).value();
  }

  fs::path dir_;
  TorchScriptLoader loader_;
};

TEST_F(TorchScriptRunnerTest, PredictReturnsTheNamedOutputs) {
  auto runner = Cpu();
  auto out = runner->Predict({at::ones({4, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(at::equal(out->at("logits"), at::full({4, 2}, 2.f)));
  EXPECT_EQ(out->at("logits").device().type(), c10::kCPU);
}

// (A TorchScript `raise ValueError` becoming INVALID_ARGUMENT needs a model compiled by
// Python; tests/integration/test_runner_errors.py serves one.)
TEST_F(TorchScriptRunnerTest, FailuresInsideTheModelAreInternal) {
  auto runner = Cpu();
  auto runtime = runner->Predict({at::ones({1, 3})});
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(runtime.status().message().find("model failed"), absl::string_view::npos);
  EXPECT_EQ(runner->Predict({at::ones({1, 2}), at::ones({1})}).status().code(),
            absl::StatusCode::kInternal);  // wrong arity
}

TEST_F(TorchScriptRunnerTest, ExplainVisitsEachLayerBeforeTheNext) {
  auto runner = Cpu();
  std::vector<float> seen;
  auto out = runner->Explain({at::ones({1, 2})}, 3, {}, [&](int l, const NamedTensors& maps) {
    seen.push_back(maps.at("attention")[0][0].item<float>());
    return l == 5 ? absl::InternalError("never") : absl::OkStatus();
  });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(seen, (std::vector<float>{0.f, 2.f, 6.f}));  // state (1, 2, 3) times l
  EXPECT_TRUE(at::equal(out->at("logits"), at::full({1, 2}, 4.f)));
  auto stopped = runner->Explain({at::ones({1, 2})}, 3, {}, [](int, const NamedTensors&) {
    return absl::ResourceExhaustedError("cap");
  });
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kResourceExhausted);
  auto bare = loader_.Load((dir_ / "bare.pt").string(), InstanceSpec{}).value();
  EXPECT_EQ(bare->Explain({at::ones({1, 2})}, 1, {}, nullptr).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST_F(TorchScriptRunnerTest, MetadataIsReadWithoutLoadingTheModel) {
  EXPECT_EQ(loader_.ReadMetadata((dir_ / "model.pt").string()).value(), kMeta);
  EXPECT_EQ(loader_.ReadMetadata((dir_ / "bare.pt").string()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loader_.ReadMetadata((dir_ / "none.pt").string()).status().code(),
            absl::StatusCode::kNotFound);
  std::ofstream(dir_ / "junk.pt") << "not a zip";
  EXPECT_EQ(loader_.ReadMetadata((dir_ / "junk.pt").string()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loader_.Load((dir_ / "junk.pt").string(), InstanceSpec{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TorchScriptRunnerTest, OpLibrariesAndDevicesAreChecked) {
  EXPECT_TRUE(loader_.CheckOps("aten").ok());
  const absl::Status missing = loader_.CheckOps("no_such_ops");
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.message().find("--ops_library"), absl::string_view::npos);
  // A GPU past the visible ones is unavailable, with the reason (with Debian's CPU-only
  // LibTorch there is none at all).
  const DeviceInventory devices = loader_.Devices();
  InstanceSpec gpu;
  gpu.kind = InstanceSpec::Kind::kGpu;
  gpu.device = devices.gpus;
  auto loaded = loader_.Load((dir_ / "model.pt").string(), gpu);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kUnavailable);
  if (devices.gpus == 0) {
    EXPECT_FALSE(devices.no_gpu_reason.empty());
    EXPECT_NE(loaded.status().message().find(devices.no_gpu_reason), absl::string_view::npos);
  }
}

// A Device that records the order of its calls (a GPU's scope, staging and copy-back are
// what a CUDA device does; here the tensors stay on the CPU).
class RecordingDevice final : public Device {
 public:
  explicit RecordingDevice(std::vector<std::string>* log) : log_(log) {}
  c10::Device torch_device() const override { return c10::Device(c10::kCPU); }
  std::unique_ptr<DeviceScope> Enter() override {
    log_->push_back("enter");
    return std::make_unique<Scope>(log_);
  }
  ModelInputs CopyIn(const ModelInputs& inputs) override {
    log_->push_back("in");
    return inputs;
  }
  NamedTensors CopyOut(const NamedTensors& tensors) override {
    log_->push_back("out");
    return tensors;
  }

 private:
  struct Scope final : DeviceScope {
    explicit Scope(std::vector<std::string>* log) : log(log) {}
    ~Scope() override { log->push_back("leave"); }
    std::vector<std::string>* log;
  };
  std::vector<std::string>* const log_;
};

TEST_F(TorchScriptRunnerTest, EveryCallRunsInsideItsDeviceScopeWithCopiesInAndOut) {
  std::vector<std::string> log;
  auto runner = TorchScriptRunner::Load((dir_ / "model.pt").string(),
                                        std::make_unique<RecordingDevice>(&log));
  ASSERT_TRUE(runner.ok()) << runner.status();
  ASSERT_TRUE((*runner)->Predict({at::ones({2, 2})}).ok());
  EXPECT_EQ(log, (std::vector<std::string>{"enter", "in", "out", "leave"}));
  log.clear();
  ASSERT_TRUE((*runner)->Explain({at::ones({1, 2})}, 2, {}, [](int, const NamedTensors&) {
    return absl::OkStatus();
  }).ok());
  // Each layer's maps come back before they are visited, and the final outputs last.
  EXPECT_EQ(log, (std::vector<std::string>{"enter", "in", "out", "out", "out", "leave"}));
}

}  // namespace
}  // namespace gatescope
