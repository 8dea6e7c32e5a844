#include "server/repository/repository_poller.h"

namespace gatescope {

RepositoryPoller::RepositoryPoller(ModelRepository* repository, absl::Duration interval,
                                   const Clock* clock)
    : repository_(repository), interval_(interval), clock_(clock) {
  thread_ = std::thread([this] { Run(); });
}

RepositoryPoller::~RepositoryPoller() { Stop(); }

void RepositoryPoller::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int RepositoryPoller::polls() const {
  absl::MutexLock lock(&mu_);
  return polls_;
}

void RepositoryPoller::Run() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    const absl::Time next = clock_->Now() + interval_;
    if (clock_->AwaitWithDeadline(mu_, absl::Condition(&stopping_), next)) return;
    mu_.Unlock();
    repository_->Poll();
    mu_.Lock();
    ++polls_;
  }
}

}  // namespace gatescope
