// Torch-free fakes for the batcher: jobs that record how they ended, and an Executor that
// records the groups it is given (optionally held closed so tests can build up a queue).
#pragma once

#include <memory>
#include <stdexcept>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/batching/job.h"

namespace gatescope::testing {

// How each of a test's jobs ended: executed, or refused with a status. Thread-safe.
class Outcomes {
 public:
  explicit Outcomes(int n) : refused_(n, absl::UnknownError("not finished")), executed_(n, false) {}
  void Refused(int id, absl::Status st) {
    absl::MutexLock l(&mu_);
    refused_[id] = std::move(st);
    ++finished_;
  }
  void Executed(int id) {
    absl::MutexLock l(&mu_);
    executed_[id] = true;
    ++finished_;
  }
  // Blocks until `n` jobs have ended.
  void Await(int n) {
    absl::MutexLock l(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= n; };
    mu_.Await(absl::Condition(&done));
  }
  // Await for at most `real_time` (a bound for a test that would otherwise hang when the
  // code under test waits on simulated time instead); whether `n` jobs ended.
  bool AwaitFor(int n, absl::Duration real_time) {
    absl::MutexLock l(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), real_time);
  }
  int finished() {
    absl::MutexLock l(&mu_);
    return finished_;
  }
  bool executed(int id) {
    absl::MutexLock l(&mu_);
    return executed_[id];
  }
  absl::StatusCode refused(int id) {
    absl::MutexLock l(&mu_);
    return executed_[id] ? absl::StatusCode::kOk : refused_[id].code();
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> refused_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> executed_ ABSL_GUARDED_BY(mu_);
  int finished_ ABSL_GUARDED_BY(mu_) = 0;
};

class RecordingJob : public Job {
 public:
  RecordingJob(int id, Outcomes* outcomes) : id(id), outcomes_(outcomes) {}
  void Refuse(absl::Status status) override { outcomes_->Refused(id, std::move(status)); }
  void Executed() { outcomes_->Executed(id); }
  const int id;

 private:
  Outcomes* const outcomes_;
};

class FakeExecutor : public Executor {
 public:
  void Execute(std::vector<std::unique_ptr<Job>> group) override {
    std::vector<int> ids;
    {
      absl::MutexLock l(&mu_);
      ++entered_;
      mu_.Await(absl::Condition(&open_));
      for (auto& job : group) ids.push_back(static_cast<RecordingJob&>(*job).id);
      groups_.push_back(ids);
      if (throw_) {
        throw_ = false;
        throw std::runtime_error("executor failure");
      }
    }
    for (auto& job : group) static_cast<RecordingJob&>(*job).Executed();
  }
  void Hold() { absl::MutexLock l(&mu_); open_ = false; }
  void Release() { absl::MutexLock l(&mu_); open_ = true; }
  void ThrowNext() { absl::MutexLock l(&mu_); throw_ = true; }
  // Blocks until Execute has been entered `n` times.
  void AwaitEntered(int n) {
    absl::MutexLock l(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  // The job ids of every group executed, in order.
  std::vector<std::vector<int>> groups() { absl::MutexLock l(&mu_); return groups_; }
  std::vector<size_t> sizes() {
    absl::MutexLock l(&mu_);
    std::vector<size_t> out;
    for (const auto& g : groups_) out.push_back(g.size());
    return out;
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  bool throw_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<int>> groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gatescope::testing
