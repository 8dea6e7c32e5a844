#include "server/repository/model_repository.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "tests/mocks/fake_runner.h"

namespace gatescope {
namespace {
namespace fs = std::filesystem;

constexpr char kMeta[] = R"({"name":"m","task":"image_classification",
  "input":{"shape":[1,2,2]},"labels":["a","b","c"],"outputs":["logits"]})";

class ModelRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("gatescope_repo_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void AddVersion(const std::string& model, const std::string& version) {
    fs::create_directories(root_ / model / version);
    std::ofstream(root_ / model / version / "model.pt") << "x";
  }

  // Loads every file; versions whose directory is named "bad" or "2" fail to load.
  absl::StatusOr<std::unique_ptr<ModelRepository>> Load() {
    RepositoryOptions options;
    options.root = root_.string();
    RunnerLoader loader = [](const std::string& path) -> absl::StatusOr<LoadedRunner> {
      if (absl::StrContains(path, "/bad/") || absl::StrContains(path, "/2/")) {
        return absl::InvalidArgumentError("cannot load");
      }
      return LoadedRunner{std::make_unique<testing::FakeRunner>(3), kMeta};
    };
    return ModelRepository::Load(options, loader, &metrics_);
  }

  fs::path root_;
  ServerMetrics metrics_{std::make_shared<prometheus::Registry>()};
};

TEST_F(ModelRepositoryTest, MissingRootIsNotFound) {
  EXPECT_EQ(Load().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, VersionsOrderNumericallyAndDefaultToHighestReady) {
  for (const char* v : {"1", "2", "10", "9"}) AddVersion("m", v);
  AddVersion("other", "bad");
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
  EXPECT_EQ(listed, (std::vector<std::string>{"m/1", "m/2", "m/9", "m/10", "other/bad"}));
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

TEST_F(ModelRepositoryTest, LoadedModelServesThroughItsScheduler) {
  AddVersion("m", "1");
  auto repo = Load();
  ASSERT_TRUE(repo.ok());
  auto model = (*repo)->Find("m", "").value();
  EXPECT_EQ(model->config.labels_size(), 3);
  absl::Notification done;
  absl::StatusOr<NamedTensors> result;
  WorkItem item;
  item.make_input = [] { return at::ones({1, 2, 2}); };
  item.done = [&](absl::StatusOr<NamedTensors> r) {
    result = std::move(r);
    done.Notify();
  };
  ASSERT_TRUE(model->scheduler->Enqueue(std::move(item)).ok());
  done.WaitForNotification();
  ASSERT_TRUE(result.ok());
  EXPECT_FLOAT_EQ(result->at("logits")[2].item<float>(), 12.f);  // sum 4 * class 3
}

}  // namespace
}  // namespace gatescope
