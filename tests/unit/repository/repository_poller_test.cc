// Polling with simulated time: a poll happens exactly when the interval has passed.
#include "server/repository/repository_poller.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/synchronization/notification.h"
#include "server/batching/dynamic_batcher.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_loader.h"

namespace gatescope {
namespace {
namespace fs = std::filesystem;

constexpr char kMeta[] = R"({"task":"image_classification","input":{"shape":[1,2,2]},
  "labels":["a"],"outputs":["logits"]})";

TEST(RepositoryPollerTest, PollsEveryIntervalOfTheClockAndStops) {
  const fs::path root = fs::temp_directory_path() / "gatescope_poller_test";
  fs::remove_all(root);
  fs::create_directories(root);
  testing::FakeLoader loader;
  testing::FakeClock clock;
  ServerMetrics metrics(std::make_shared<prometheus::Registry>());
  RepositoryOptions options;
  options.root = root.string();
  RepositoryDeps deps{&loader, &metrics, DynamicBatcher::Factory(&clock), &clock};
  auto repo = ModelRepository::Load(options, std::move(deps)).value();
  absl::Notification loaded;
  repo->SetStateListener([&](const std::string& name, bool ready) {
    if (name == "m" && ready) loaded.Notify();
  });

  RepositoryPoller poller(repo.get(), absl::Seconds(15), &clock);
  clock.AwaitWaiters(1);
  fs::create_directories(root / "m" / "1");
  std::ofstream(root / "m" / "1" / "model.pt") << kMeta;
  clock.Advance(absl::Seconds(14));
  EXPECT_EQ(poller.polls(), 0);
  EXPECT_FALSE(repo->Find("m", "").ok());
  clock.Advance(absl::Seconds(1));  // the interval has passed: the poll loads m
  loaded.WaitForNotification();
  EXPECT_TRUE(repo->Find("m", "").value()->ready());
  clock.AwaitWaiters(1);  // waiting for the next interval
  EXPECT_EQ(poller.polls(), 1);
  poller.Stop();  // wakes the wait at once
  EXPECT_EQ(poller.polls(), 1);
  fs::remove_all(root);
}

}  // namespace
}  // namespace gatescope
