#include "server/repository/model_repository.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "server/batching/dynamic_batcher.h"
#include "server/repository/repository_names.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_loader.h"
#include "tests/mocks/tensor_job.h"

namespace gatescope {
namespace {
namespace fs = std::filesystem;

constexpr char kMeta[] = R"({"name":"m","task":"image_classification",
  "input":{"shape":[1,2,2]},"labels":["a","b","c"],"outputs":["logits"],
  "required_ops":["gatescope"]})";

class ModelRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("gatescope_repo_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A version whose "model file" is its metadata (the fake loader's format); versions
  // named "2" or "7" carry metadata that does not parse, so they fail to load.
  void AddVersion(const std::string& model, const std::string& version,
                  const std::string& meta = kMeta) {
    fs::create_directories(root_ / model / version);
    const bool bad = version == "7" || version == "2";
    std::ofstream(root_ / model / version / "model.pt") << (bad ? "not json" : meta);
  }

  absl::StatusOr<std::unique_ptr<ModelRepository>> Load() { return LoadFrom(root_); }

  absl::StatusOr<std::unique_ptr<ModelRepository>> LoadFrom(const fs::path& root,
                                                            bool warm_up = true) {
    RepositoryOptions options;
    options.root = root.string();
    options.defaults.warm_up = warm_up;
    RepositoryDeps deps;
    deps.loader = &loader_;
    deps.metrics = &metrics_;
    deps.schedulers = DynamicBatcher::Factory(&clock_);
    deps.clock = &clock_;
    return ModelRepository::Load(options, std::move(deps));
  }

  fs::path root_;
  testing::FakeLoader loader_;
  testing::FakeClock clock_;
  ServerMetrics metrics_{std::make_shared<prometheus::Registry>()};
};

TEST_F(ModelRepositoryTest, MissingRootIsNotFound) {
  EXPECT_EQ(Load().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, EachInstanceWarmsUpBeforeItsModelServes) {
  AddVersion("m", "1");
  std::ofstream(root_ / "m" / "config.pbtxt") << "instance_group { count: 2 }";
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto model = (*repo)->Find("m", "");
  ASSERT_TRUE(model.ok() && (*model)->ready());
  const std::vector<testing::FakeRunner*> runners = loader_.runners();
  ASSERT_EQ(runners.size(), 2u);
  for (testing::FakeRunner* runner : runners) {
    EXPECT_EQ(runner->batch_sizes(), (std::vector<int64_t>{1, 1}));  // profiling, optimised
  }
}

TEST_F(ModelRepositoryTest, WithoutWarmUpNoForwardRunsBeforeTheFirstRequest) {
  AddVersion("m", "1");
  auto repo = LoadFrom(root_, /*warm_up=*/false);
  ASSERT_TRUE(repo.ok()) << repo.status();
  ASSERT_EQ(loader_.runners().size(), 1u);
  EXPECT_TRUE(loader_.runners()[0]->batch_sizes().empty());
}

TEST_F(ModelRepositoryTest, AFailedWarmUpIsNoReasonNotToServe) {
  AddVersion("m", "1");
  loader_.FailNewRunnersWith(absl::InvalidArgumentError("the model refuses zeros"));
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto model = (*repo)->Find("m", "");
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE((*model)->ready());
  EXPECT_EQ(loader_.runners()[0]->batch_sizes(), (std::vector<int64_t>{1}));  // then stopped
}

TEST_F(ModelRepositoryTest, ConfiguredWarmUpSamplesRunAndOnesThatDoNotFitFailTheLoad) {
  const std::string sample = R"pb(
    model_warmup { name: "w" batch_size: 2 count: 3
      inputs { key: "input" value { data_type: TYPE_FP32 dims: DIMS zero_data: true } } })pb";
  auto with_dims = [&](const std::string& dims) {
    std::string text = sample;
    return text.replace(text.find("DIMS"), 4, dims);
  };
  AddVersion("m", "1");
  std::ofstream(root_ / "m" / "config.pbtxt") << with_dims("[ 1, 2, 2 ]");
  AddVersion("bad", "1");
  std::ofstream(root_ / "bad" / "config.pbtxt") << with_dims("[ 1, 4, 4 ]");
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  ASSERT_TRUE((*repo)->Find("m", "").value()->ready());
  const auto bad = (*repo)->Find("bad", "1");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ((*bad)->load_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE((*bad)->load_status.message().find("dims [1,4,4] do not fit input 'input' [1,2,2]"),
            std::string::npos)
      << (*bad)->load_status;
  // Only the good model's instance was made; it ran the sample, not the default warm-up.
  ASSERT_EQ(loader_.runners().size(), 1u);
  EXPECT_EQ(loader_.runners()[0]->batch_sizes(), (std::vector<int64_t>{2, 2, 2}));
}

TEST_F(ModelRepositoryTest, AWarmUpSampleCanReadItsDataFromTheModelsWarmupDirectory) {
  const std::string sample = R"pb(
    model_warmup { name: "w" batch_size: 2
      inputs { key: "input" value { data_type: TYPE_FP32 dims: [ 1, 2, 2 ]
                                    input_data_file: "FILE" } } })pb";
  auto with_file = [&](const std::string& file) {
    std::string text = sample;
    return text.replace(text.find("FILE"), 4, file);
  };
  auto write_floats = [](const fs::path& path, const std::vector<float>& values) {
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
  };
  AddVersion("m", "1");  // its warmup/ directory is not a version
  std::ofstream(root_ / "m" / "config.pbtxt") << with_file("one/example.bin");
  write_floats(root_ / "m" / "warmup" / "one" / "example.bin", {1, 2, 3, 4, 100});
  AddVersion("short", "1");
  std::ofstream(root_ / "short" / "config.pbtxt") << with_file("x.bin");
  write_floats(root_ / "short" / "warmup" / "x.bin", {1, 2, 3});
  AddVersion("missing", "1");
  std::ofstream(root_ / "missing" / "config.pbtxt") << with_file("x.bin");
  AddVersion("outside", "1");  // a link out of the repository is refused, as for models
  std::ofstream(root_ / "outside" / "config.pbtxt") << with_file("x.bin");
  const fs::path elsewhere = root_.string() + "_elsewhere.bin";
  write_floats(elsewhere, {1, 2, 3, 4});
  fs::create_directories(root_ / "outside" / "warmup");
  fs::create_symlink(elsewhere, root_ / "outside" / "warmup" / "x.bin");
  AddVersion("up", "1");  // no ".." even where it would stay inside the repository
  std::ofstream(root_ / "up" / "config.pbtxt") << with_file("../../m/warmup/one/example.bin");
  AddVersion("dir", "1");
  std::ofstream(root_ / "dir" / "config.pbtxt") << with_file("x.bin");
  fs::create_directories(root_ / "dir" / "warmup" / "x.bin");

  auto repo = Load();
  fs::remove(elsewhere);
  ASSERT_TRUE(repo.ok()) << repo.status();
  ASSERT_TRUE((*repo)->Find("m", "").value()->ready());
  ASSERT_EQ(loader_.runners().size(), 1u);
  // The file's first 4 floats (one example of [1,2,2]) twice: 2 x (1 + 2 + 3 + 4).
  EXPECT_EQ(loader_.runners()[0]->input_sums(), (std::vector<double>{20}));
  int versions_of_m = 0;
  for (const auto& model : (*repo)->List()) versions_of_m += model->name == "m";
  EXPECT_EQ(versions_of_m, 1);
  struct Case {
    std::string model;
    absl::StatusCode code;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"short", absl::StatusCode::kInvalidArgument,
            "input_data_file 'x.bin' holds 12 bytes; dims [1,2,2] of FP32 need 16"},
           {"missing", absl::StatusCode::kNotFound, "'missing/warmup/x.bin' does not exist"},
           {"outside", absl::StatusCode::kPermissionDenied, "outside the model repository"},
           {"up", absl::StatusCode::kInvalidArgument, "a relative path, no '..'"},
           {"dir", absl::StatusCode::kInvalidArgument, "'dir/warmup/x.bin' is not a regular file"}}) {
    auto model = (*repo)->Find(c.model, "1");
    ASSERT_TRUE(model.ok()) << c.model;
    EXPECT_EQ((*model)->load_status.code(), c.code) << (*model)->load_status;
    EXPECT_NE((*model)->load_status.message().find(c.says), std::string::npos)
        << (*model)->load_status;
  }
}

TEST_F(ModelRepositoryTest, PollingReloadsAModelWhoseWarmUpFileChanged) {
  AddVersion("m", "1");
  std::ofstream(root_ / "m" / "config.pbtxt") << R"pb(
    model_warmup { name: "w" batch_size: 1
      inputs { key: "input" value { data_type: TYPE_FP32 dims: [ 1, 2, 2 ]
                                    input_data_file: "x.bin" } } })pb";
  fs::create_directories(root_ / "m" / "warmup");
  const fs::path file = root_ / "m" / "warmup" / "x.bin";
  std::ofstream(file, std::ios::binary) << std::string(16, '\0');
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  ASSERT_TRUE((*repo)->Find("m", "").value()->ready());
  (*repo)->Poll();
  EXPECT_EQ(loader_.runners().size(), 1u);  // nothing changed
  std::ofstream(file, std::ios::binary) << std::string(16, '\1');
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(1));
  (*repo)->Poll();
  EXPECT_EQ(loader_.runners().size(), 2u);  // reloaded, and warmed up on the new data
  EXPECT_GT(loader_.runners()[1]->input_sums().at(0), 0.0);
  // A warmup/ that links out of the repository is not looked into: what changes there
  // reloads nothing (and its file is refused when the model loads).
  const fs::path outside = root_.string() + "_outside";
  fs::create_directories(outside);
  fs::remove_all(root_ / "m" / "warmup");
  fs::create_directory_symlink(outside, root_ / "m" / "warmup");
  (*repo)->Poll();
  const size_t runners = loader_.runners().size();
  std::ofstream(outside / "new.bin") << "abcd";
  (*repo)->Poll();
  EXPECT_EQ(loader_.runners().size(), runners);
  fs::remove_all(outside);
}

TEST_F(ModelRepositoryTest, VersionsOrderNumericallyAndDefaultToHighestReady) {
  for (const char* v : {"1", "2", "10", "9"}) AddVersion("m", v);
  AddVersion("other", "7");
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  // "2" failed; the highest ready version is 10 (numeric, not text, order).
  auto latest = (*repo)->Find("m", "");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->version, "10");
  EXPECT_TRUE((*latest)->ready());
  auto two = (*repo)->Find("m", "2");
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE((*two)->ready());
  EXPECT_EQ((*repo)->Find("m", "3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*repo)->Find("nope", "").status().code(), absl::StatusCode::kNotFound);
  // A model with no loadable version is still listed, as not ready.
  auto other = (*repo)->Find("other", "");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)->ready());

  std::vector<std::string> listed;
  for (const auto& m : (*repo)->List()) listed.push_back(m->name + "/" + m->version);
  EXPECT_EQ(listed, (std::vector<std::string>{"m/1", "m/2", "m/9", "m/10", "other/7"}));
}

TEST_F(ModelRepositoryTest, ServesEveryModelWhenEachNameHasAReadyVersion) {
  AddVersion("m", "1");
  AddVersion("m", "2");  // fails beside a ready version: the server still serves m
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  EXPECT_TRUE((*repo)->ServesEveryModel());
  AddVersion("other", "7");  // a model none of whose versions loads
  ASSERT_FALSE((*repo)->LoadModel("other").ok());
  EXPECT_FALSE((*repo)->ServesEveryModel());
  ASSERT_TRUE((*repo)->UnloadModel("other").ok());
  EXPECT_TRUE((*repo)->ServesEveryModel());
}

TEST_F(ModelRepositoryTest, OnlyNumberedVersionsAndPortableModelNamesCount) {
  // Backups and aliases next to the versions are not versions: "1.bak" and "latest" would
  // otherwise sort above every number and serve as the default.
  for (const char* v : {"1", "3", "1.bak", "latest", "03"}) AddVersion("m", v);
  AddVersion(".hidden", "1");
  AddVersion("has space", "1");
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  std::vector<std::string> listed;
  for (const auto& m : (*repo)->List()) listed.push_back(m->name + "/" + m->version);
  EXPECT_EQ(listed, (std::vector<std::string>{"m/1", "m/3"}));
  EXPECT_EQ((*repo)->Find("m", "").value()->version, "3");
  EXPECT_EQ((*repo)->Find("m", "latest").status().code(), absl::StatusCode::kNotFound);

  // Names a client sends: control bytes, separators and overlong names are refused before
  // the file system is touched, and errors quote them escaped and cut.
  const std::string nul("m\0x", 3);
  for (const std::string& bad : {nul, std::string("../m"), std::string(".hidden"),
                                 std::string("has space"), std::string(129, 'a'),
                                 std::string("caf\xc3\xa9"), std::string()}) {
    const absl::Status status = (*repo)->LoadModel(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_LT(status.message().size(), 200u) << status;
  }
  EXPECT_NE((*repo)->LoadModel(nul).message().find("'m\\x00x'"), std::string::npos)
      << (*repo)->LoadModel(nul);
  EXPECT_EQ((*repo)->LoadModel(std::string(128, 'a')).code(), absl::StatusCode::kNotFound);

  const std::string long_name(8000, 'x');
  const absl::Status missing = (*repo)->Find(long_name, "").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_LT(missing.message().size(), 120u);
  EXPECT_NE(missing.message().find("(8000 bytes)"), std::string::npos) << missing;
  // Errors name models, not where the repository lives.
  EXPECT_EQ((*repo)->LoadModel("absent").message().find(root_.string()), std::string::npos);
}

TEST_F(ModelRepositoryTest, ConfigFileSetsBatchingAndInstances) {
  AddVersion("m", "1");
  std::ofstream(root_ / "m" / "config.pbtxt")
      << "max_batch_size: 4 dynamic_batching { max_queue_delay_microseconds: 500 }"
         " instance_group { count: 3 }";
  AddVersion("broken_config", "1");
  std::ofstream(root_ / "broken_config" / "config.pbtxt") << "no_such_field: 1";
  auto repo = Load();
  ASSERT_TRUE(repo.ok());
  auto m = (*repo)->Find("m", "").value();
  ASSERT_TRUE(m->ready()) << m->load_status;
  EXPECT_EQ(m->instances.size(), 3u);
  ASSERT_EQ(m->plan.groups.size(), 1u);
  EXPECT_EQ(m->plan.groups[0].kind(), ::inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(m->plan.batching.max_batch_size, 4);
  EXPECT_EQ(m->plan.batching.max_queue_delay, absl::Microseconds(500));
  auto broken = (*repo)->Find("broken_config", "").value();
  EXPECT_FALSE(broken->ready());
  EXPECT_NE(std::string(broken->load_status.message()).find("no_such_field"), std::string::npos);
}

TEST_F(ModelRepositoryTest, LoadUnloadAndPollAtRunTime) {
  AddVersion("m", "1");
  auto repo = Load();
  ASSERT_TRUE(repo.ok());
  std::vector<std::pair<std::string, bool>> events;
  (*repo)->SetStateListener([&](const std::string& name, bool ready) {
    events.emplace_back(name, ready);
  });
  auto v1 = (*repo)->Find("m", "").value();

  // A new model appears: explicit load.
  AddVersion("n", "1");
  EXPECT_EQ((*repo)->Find("n", "").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*repo)->LoadModel("n").ok());
  EXPECT_TRUE((*repo)->Find("n", "").value()->ready());

  // A new version of m: reload swaps it in; the old version object stays usable by holders.
  AddVersion("m", "3");
  ASSERT_TRUE((*repo)->LoadModel("m").ok());
  EXPECT_EQ((*repo)->Find("m", "").value()->version, "3");
  EXPECT_EQ(v1->version, "1");

  ASSERT_TRUE((*repo)->UnloadModel("n").ok());
  EXPECT_EQ((*repo)->Find("n", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*repo)->UnloadModel("n").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*repo)->LoadModel("nope").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*repo)->LoadModel("../m").code(), absl::StatusCode::kInvalidArgument);

  // Poll: picks up a new directory, drops a removed one, leaves unchanged ones alone.
  AddVersion("p", "1");
  fs::remove_all(root_ / "m");
  fs::remove_all(root_ / "n");  // else polling would load it again
  auto n_before = events.size();
  (*repo)->Poll();
  EXPECT_TRUE((*repo)->Find("p", "").ok());
  EXPECT_FALSE((*repo)->Find("m", "").ok());
  EXPECT_EQ(events.size(), n_before + 2);
  (*repo)->Poll();
  EXPECT_EQ(events.size(), n_before + 2);  // nothing changed

  EXPECT_EQ(events.front(), std::make_pair(std::string("n"), true));
  EXPECT_EQ(events[2], std::make_pair(std::string("n"), false));
}

// The value of gatescope_reference_mean{model, statistic="gate_mean", layer}; -1 if absent.
double ReferenceMean(prometheus::Registry& registry, const std::string& model,
                     const std::string& layer) {
  for (const auto& family : registry.Collect()) {
    if (family.name != "gatescope_reference_mean") continue;
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& l : metric.label) labels[l.name] = l.value;
      if (labels["model"] == model && labels["statistic"] == "gate_mean" &&
          labels["layer"] == layer) {
        return metric.gauge.value;
      }
    }
  }
  return -1;
}

TEST_F(ModelRepositoryTest, CardReferencesAreExportedOnLoadAndDroppedOnUnload) {
  AddVersion("m", "1");
  AddVersion("n", "1");
  std::ofstream(root_ / "m" / "README.md")
      << "# m\n\n```json monitoring-reference\n[{\"metric\": \"gatescope_gate_mean\", "
         "\"mean\": [0.54068, 0.5168], \"std\": [0.03201, 0.0214]}]\n```\n";
  std::ofstream(root_ / "n" / "README.md") << "```json monitoring-reference\nnot json\n```\n";
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto& registry = *metrics_.registry();
  EXPECT_EQ(ReferenceMean(registry, "m", "0"), 0.54068);
  EXPECT_EQ(ReferenceMean(registry, "m", "1"), 0.5168);
  // A card that does not parse exports nothing; the model itself serves.
  EXPECT_TRUE((*repo)->Find("n", "").value()->ready());
  EXPECT_EQ(ReferenceMean(registry, "n", "0"), -1);
  // A rewritten card is a change polling reloads.
  std::ofstream(root_ / "m" / "README.md")
      << "```json monitoring-reference\n[{\"metric\": \"gatescope_gate_mean\", "
         "\"mean\": [0.5], \"std\": [0.01]}]\n```\n";
  fs::last_write_time(root_ / "m" / "README.md",
                      fs::last_write_time(root_ / "m" / "README.md") + std::chrono::seconds(2));
  (*repo)->Poll();
  EXPECT_EQ(ReferenceMean(registry, "m", "0"), 0.5);
  EXPECT_EQ(ReferenceMean(registry, "m", "1"), -1);
  ASSERT_TRUE((*repo)->UnloadModel("m").ok());
  EXPECT_EQ(ReferenceMean(registry, "m", "0"), -1);
}

TEST_F(ModelRepositoryTest, FailedReloadKeepsServingAndStopRefusesControl) {
  AddVersion("m", "1");
  auto repo = Load();
  ASSERT_TRUE(repo.ok());
  fs::remove_all(root_ / "m" / "1");
  AddVersion("m", "bad");  // the only version now fails to load
  EXPECT_FALSE((*repo)->LoadModel("m").ok());
  auto m = (*repo)->Find("m", "");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->version, "1");  // the loaded version still serves
  EXPECT_TRUE((*m)->ready());
  (*repo)->StopAll();
  EXPECT_EQ((*repo)->LoadModel("m").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*repo)->UnloadModel("m").code(), absl::StatusCode::kUnavailable);
}

TEST_F(ModelRepositoryTest, LoadedModelServesThroughItsTaskAndScheduler) {
  AddVersion("m", "1");
  auto repo = Load();
  ASSERT_TRUE(repo.ok());
  auto model = (*repo)->Find("m", "").value();
  ASSERT_TRUE(model->ready()) << model->load_status;
  EXPECT_EQ(model->config.labels_size(), 3);
  EXPECT_EQ(model->config.input().color(), "gray");  // the task filled its defaults
  EXPECT_EQ(model->task->Signature().outputs.front().name, "logits");
  testing::Results results(1);
  WorkItem item;
  item.job = std::make_unique<testing::TensorJob>(0, &results, [] { return at::ones({1, 2, 2}); });
  ASSERT_TRUE(model->scheduler->Enqueue(std::move(item)).ok());
  results.Await(1);
  absl::MutexLock l(&results.mu);
  ASSERT_TRUE(results.by_index[0].ok());
  EXPECT_FLOAT_EQ(results.by_index[0]->at("logits")[2].item<float>(), 12.f);  // sum 4 * class 3
}

TEST_F(ModelRepositoryTest, ModelsThatCannotRunAreNotReadyWithTheReasonAndOthersServe) {
  AddVersion("ok", "1");
  // KIND_GPU without a visible GPU: the plan cannot be made.
  AddVersion("gpu_any", "1");
  std::ofstream(root_ / "gpu_any" / "config.pbtxt") << "instance_group { kind: KIND_GPU }";
  // KIND_GPU on a listed GPU: the instance cannot be loaded on it.
  AddVersion("gpu_one", "1");
  std::ofstream(root_ / "gpu_one" / "config.pbtxt") << "instance_group { kind: KIND_GPU gpus: [1] }";
  // An op library that is not loaded.
  AddVersion("ops", "1", R"({"task":"image_classification","input":{"shape":[1,2,2]},
    "labels":["a"],"outputs":["logits"],"required_ops":["other_ops"]})");
  // A task the server does not know.
  AddVersion("task", "1", R"({"task":"speech","labels":["a"],"outputs":["logits"]})");
  auto repo = Load();
  ASSERT_TRUE(repo.ok());
  auto reason = [&](const char* name) {
    auto m = (*repo)->Find(name, "").value();
    EXPECT_FALSE(m->ready()) << name;
    return m->load_status;
  };
  EXPECT_TRUE((*repo)->Find("ok", "").value()->ready());
  EXPECT_EQ(reason("gpu_any").code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(reason("gpu_any").message().find("no GPU is visible"), absl::string_view::npos);
  EXPECT_EQ(reason("gpu_one").code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(reason("gpu_one").message().find("on GPU 1"), absl::string_view::npos);
  EXPECT_EQ(reason("ops").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(reason("ops").message().find("other_ops"), absl::string_view::npos);
  EXPECT_EQ(reason("task").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reason("task").message().find("unsupported task 'speech'"), absl::string_view::npos);
}

TEST_F(ModelRepositoryTest, GpuInstancesLoadOnTheirDevicesWhenThereAreSome) {
  loader_.SetGpus(2);
  AddVersion("m", "1");
  std::ofstream(root_ / "m" / "config.pbtxt")
      << "instance_group { kind: KIND_GPU count: 2 } instance_group { kind: KIND_CPU }";
  auto repo = Load();
  ASSERT_TRUE(repo.ok());
  auto m = (*repo)->Find("m", "").value();
  ASSERT_TRUE(m->ready()) << m->load_status;
  EXPECT_EQ(m->instances.size(), 5u);  // 2 on each of 2 GPUs, 1 on the CPU
  EXPECT_EQ(loader_.loads(), 5);
  ASSERT_EQ(m->plan.groups.size(), 2u);
  EXPECT_EQ(m->plan.groups[0].gpus_size(), 2);
}

// A text model `name` reading `max_tokens` pieces, with a GPU instance that records CUDA
// graphs and config.pbtxt's `more` (the tokenizer is the loader's extra file).
void AddTextModel(const fs::path& root, const std::string& name, int max_tokens,
                  const std::string& more) {
  fs::create_directories(root / name / "1");
  std::ofstream(root / name / "1" / "model.pt")
      << R"({"name":")" << name << R"(","task":"text_classification","labels":["a","b"],
    "outputs":["logits"],"text":{"tokenizer":"sentencepiece","tokenizer_file":"tokenizer.model",
    "max_tokens":)" << max_tokens << R"(,"overflow":"truncate","pad_id":0}})";
  std::ofstream(root / name / "config.pbtxt")
      << more << " instance_group { kind: KIND_GPU } optimization { cuda { graphs: true } }";
}

TEST_F(ModelRepositoryTest, TextInstancesThatRecordGraphsWarmUpEveryLengthBucket) {
  loader_.SetGpus(1);
  std::ifstream tokenizer(std::string(GATESCOPE_SOURCE_DIR) +
                          "/tests/data/tiny_sentencepiece.model", std::ios::binary);
  loader_.SetExtraFile("tokenizer.model", std::string(std::istreambuf_iterator<char>(tokenizer),
                                                      std::istreambuf_iterator<char>()));
  AddTextModel(root_, "t", 40, "max_batch_size: 2 instance_group { kind: KIND_CPU }");
  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto t = (*repo)->Find("t", "").value();
  ASSERT_TRUE(t->ready()) << t->load_status;
  const std::vector<testing::FakeRunner*> runners = loader_.runners();
  ASSERT_EQ(runners.size(), 2u);
  // The GPU instance: batch buckets 1 and 2 at each length bucket up to max_tokens, three
  // calls each (two warm-up calls, then the recording).
  std::vector<std::vector<int64_t>> graphed;
  for (int64_t length : {16, 32, 40}) {
    for (int64_t batch : {1, 2}) graphed.insert(graphed.end(), 3, {batch, length});
  }
  EXPECT_EQ(runners[1]->input_shapes(), graphed);
  // The CPU instance profiles the longest text, unpadded beyond it.
  EXPECT_EQ(runners[0]->input_shapes(), (std::vector<std::vector<int64_t>>(2, {1, 40})));

  // More shapes than an instance keeps graphs for (6 lengths up to 512 x 7 batch buckets
  // up to 64) load with a warning that says so.
  AddTextModel(root_, "long", 512, "max_batch_size: 64");
  ::testing::internal::CaptureStderr();
  const absl::Status long_loaded = (*repo)->LoadModel("long");
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(long_loaded.ok()) << long_loaded;
  EXPECT_NE(said.find("42 input shapes (6 lengths x batch buckets up to 64) but an instance "
                      "keeps 32 CUDA graphs"),
            std::string::npos)
      << said;
  EXPECT_EQ(t->instances.size(), 2u);  // the first model is as it was
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE((*repo)->LoadModel("t").ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("CUDA graphs;"), std::string::npos);

  // A server built without CUDA graphs: the GPU instance warms up as a CPU one does.
  loader_.SetGraphsAvailable(false);
  const size_t before = loader_.runners().size();
  ASSERT_TRUE((*repo)->LoadModel("t").ok());
  const std::vector<testing::FakeRunner*> reloaded = loader_.runners();
  ASSERT_EQ(reloaded.size(), before + 2);
  for (size_t i = before; i < reloaded.size(); ++i) {
    EXPECT_EQ(reloaded[i]->input_shapes(), (std::vector<std::vector<int64_t>>(2, {1, 40}))) << i;
  }
}

// The load error of `name`'s default entry (OK if it serves).
absl::Status LoadStatus(ModelRepository& repo, const std::string& name) {
  auto model = repo.Find(name, "");
  return model.ok() ? (*model)->load_status : model.status();
}

TEST_F(ModelRepositoryTest, SymlinksLeavingTheRepositoryAreRefusedAndTheOthersLoad) {
  // Beside the root, with the root's name as a string prefix: a prefix comparison of
  // strings would take it for the inside.
  const fs::path outside = root_.string() + "_outside";
  fs::remove_all(outside);
  fs::create_directories(outside / "ext" / "1");
  fs::create_directories(outside / "v");
  std::ofstream(outside / "ext" / "1" / "model.pt") << kMeta;
  std::ofstream(outside / "v" / "model.pt") << kMeta;
  std::ofstream(outside / "model.pt") << kMeta;
  std::ofstream(outside / "config.pbtxt") << "max_batch_size: 1";
  AddVersion("ok", "1");
  fs::create_directories(root_);
  fs::create_directory_symlink(outside / "ext", root_ / "ext");  // a model directory
  fs::create_directory_symlink(fs::path("..") / outside.filename() / "ext", root_ / "rel");
  AddVersion("ver", "1");
  fs::create_directory_symlink(outside / "v", root_ / "ver" / "3");  // a version directory
  fs::create_directories(root_ / "file" / "1");
  fs::create_symlink(outside / "model.pt", root_ / "file" / "1" / "model.pt");
  AddVersion("conf", "1");
  fs::create_symlink(outside / "config.pbtxt", root_ / "conf" / "config.pbtxt");

  auto repo = Load();
  ASSERT_TRUE(repo.ok()) << repo.status();
  EXPECT_TRUE(LoadStatus(**repo, "ok").ok());
  for (const char* name : {"ext", "rel"}) {
    const absl::Status st = LoadStatus(**repo, name);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << name << ": " << st;
    EXPECT_NE(st.message().find(absl::StrCat("model directory '", name,
                                             "' resolves outside the model repository")),
              absl::string_view::npos) << st;
    EXPECT_EQ(st.message().find(outside.string()), absl::string_view::npos) << st;
    EXPECT_EQ((*repo)->Find(name, "").value()->version, "");  // one refused entry
    EXPECT_EQ((*repo)->LoadModel(name).code(), absl::StatusCode::kPermissionDenied);
  }
  // The version inside serves; the one linked outside is listed, refused.
  EXPECT_EQ((*repo)->Find("ver", "").value()->version, "1");
  const absl::Status ver3 = (*repo)->Find("ver", "3").value()->load_status;
  EXPECT_EQ(ver3.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(ver3.message().find("version directory 'ver/3'"), absl::string_view::npos) << ver3;
  const absl::Status file = LoadStatus(**repo, "file");
  EXPECT_EQ(file.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(file.message().find("'file/1/model.pt'"), absl::string_view::npos) << file;
  const absl::Status conf = LoadStatus(**repo, "conf");
  EXPECT_EQ(conf.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(conf.message().find("'conf/config.pbtxt'"), absl::string_view::npos) << conf;
  // Runners were made for ok/1 and ver/1 only: nothing outside reached the loader.
  EXPECT_EQ(loader_.loads(), 2);
  fs::remove_all(outside);
}

TEST_F(ModelRepositoryTest, SymlinksInsideTheRepositoryAreFollowed) {
  AddVersion("m", "1");
  fs::create_directory_symlink(root_ / "m", root_ / "alias");          // absolute target
  AddVersion("n", "1");
  fs::create_directory_symlink(fs::path("..") / "m" / "1", root_ / "n" / "2");  // relative
  fs::create_directories(root_ / "n" / "3");
  fs::create_symlink(fs::path("..") / ".." / "m" / "1" / "model.pt",
                     root_ / "n" / "3" / "model.pt");  // a file
  // The root itself reached through a link: inside is judged against where it resolves.
  const fs::path via = root_.string() + "_via";
  fs::remove(via);
  fs::create_directory_symlink(root_, via);
  auto repo = LoadFrom(via);
  ASSERT_TRUE(repo.ok()) << repo.status();
  std::vector<std::string> listed;
  for (const auto& m : (*repo)->List()) {
    EXPECT_TRUE(m->ready()) << m->name << "/" << m->version << ": " << m->load_status;
    listed.push_back(m->name + "/" + m->version);
  }
  EXPECT_EQ(listed, (std::vector<std::string>{"alias/1", "m/1", "n/1", "n/2", "n/3"}));
  EXPECT_EQ(loader_.loads(), 5);

  // Re-pointing the alias outside is a change a poll sees; the reload is refused and,
  // as for any failed reload, the versions loaded from inside keep serving.
  const fs::path outside = root_.string() + "_outside";
  fs::create_directories(outside / "1");
  std::ofstream(outside / "1" / "model.pt") << kMeta;
  fs::remove(root_ / "alias");
  fs::create_directory_symlink(outside, root_ / "alias");
  (*repo)->Poll();
  EXPECT_EQ(loader_.loads(), 5);
  EXPECT_TRUE(LoadStatus(**repo, "alias").ok());
  EXPECT_EQ((*repo)->LoadModel("alias").code(), absl::StatusCode::kPermissionDenied);
  fs::remove(via);
  fs::remove_all(outside);
}

}  // namespace
}  // namespace gatescope

namespace gatescope {
namespace {

// Load errors reach clients (RepositoryIndex, UNAVAILABLE answers): the repository's path,
// as configured or resolved, never appears in them.
TEST(HideRepositoryPath, ReplacesEveryRootInTheMessage) {
  const absl::Status raw = absl::InvalidArgumentError(
      "cannot read /srv/models/m/2/model.pt: PytorchStreamReader failed reading "
      "/srv/models/m/2/model.pt (also /mnt/real/m)");
  const absl::Status hidden = HideRepositoryPath(raw, {"/mnt/real", "/srv/models"});
  EXPECT_EQ(hidden.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hidden.message(),
            "cannot read <repository>/m/2/model.pt: PytorchStreamReader failed reading "
            "<repository>/m/2/model.pt (also <repository>/m)");
  EXPECT_TRUE(HideRepositoryPath(absl::OkStatus(), {"/srv"}).ok());
  EXPECT_EQ(HideRepositoryPath(absl::NotFoundError("/x"), {"/", ""}).message(), "/x");
}

}  // namespace
}  // namespace gatescope
