// The dynamic-batching policy: which waiting requests form the next batch, and when.
// Pure code (no Torch, no gRPC, no clock: time is passed in), so it is tested exactly.
// Semantics follow Triton's dynamic batcher (see DynamicBatchingConfig).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/config/batching_config.h"

namespace gatescope {

// Waiting requests of one model, in service order: priority level, then arrival; requests
// delayed past their queue timeout (timeout_action DELAY) come after all others.
// Not thread-safe: the owner serialises access.
template <typename Payload>
class BatchQueue {
 public:
  struct Entry {
    Payload payload;
    absl::Time enqueued;
    absl::Time queue_deadline = absl::InfiniteFuture();   // from the queue policy
    absl::Time client_deadline = absl::InfiniteFuture();  // from the caller
    uint64_t shape_key = 0;  // only entries with equal keys share a batch
    int level = 0;           // 0-based priority level
    bool alone = false;      // forms a batch of its own
  };

  // What to do next. `batch` non-empty: run it now. Otherwise wait until `wake_at` (or a
  // new arrival); `wake_at` unset: nothing is waiting.
  struct Decision {
    std::vector<Entry> batch;
    std::optional<absl::Time> wake_at;
  };

  // `config` must have passed NormaliseBatchingConfig. `opened`: when the queue began to
  // take requests, if known. With release_when_arrivals_are_sparse the quiet time from
  // then to the first arrival counts as that arrival's gap, so a first request that comes
  // long after its model loaded runs at once instead of waiting the whole delay; without
  // it (InfinitePast) the first arrival waits the delay, as no gap is known yet.
  explicit BatchQueue(DynamicBatchingConfig config, absl::Time opened = absl::InfinitePast())
      : config_(std::move(config)),
        levels_(std::max(1, config_.priority_levels)),
        delayed_per_level_(levels_.size(), 0) {
    if (opened != absl::InfinitePast()) {
      last_arrival_ = opened;
      arrivals_ = 1;
    }
  }

  const DynamicBatchingConfig& config() const { return config_; }

  // Queues a request. `priority` 0 means the default level; `timeout` is the request's own
  // queue timeout (used only if the policy allows overrides; zero: none given); `alone`
  // entries always form a batch of one. `arrival` false: a later entry of the same call
  // as the one pushed before it, which early release does not count as an arrival of its
  // own. RESOURCE_EXHAUSTED when its level is full, INVALID_ARGUMENT for a bad priority;
  // on error the payload is left untouched in *payload.
  absl::Status Push(Payload& payload, absl::Time now, absl::Time client_deadline,
                    uint64_t shape_key, int priority, absl::Duration timeout,
                    bool alone = false, bool arrival = true) {
    int level = priority == 0 ? DefaultLevel() : priority - 1;
    if (level < 0 || level >= static_cast<int>(levels_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("priority must be in 1..", levels_.size(), " (0: default)"));
    }
    const QueuePolicy& policy = config_.queue_policy;
    // Entries demoted by a DELAY timeout still count against their level's limit.
    if (policy.max_queue_size > 0 &&
        static_cast<int>(levels_[level].size() + delayed_per_level_[level]) >=
            policy.max_queue_size) {
      return absl::ResourceExhaustedError(
          absl::StrCat("model queue is full (", policy.max_queue_size, " waiting)"));
    }
    absl::Duration wait = policy.default_timeout;
    if (policy.allow_timeout_override && timeout > absl::ZeroDuration()) wait = timeout;
    Entry e{std::move(payload), now, now + wait, client_deadline, shape_key, level, alone};
    levels_[level].push_back(std::move(e));
    ++size_;
    if (!alone && arrival) NoteArrival(now);  // an alone entry (an explanation) joins no batch
    return absl::OkStatus();
  }

  size_t size() const { return size_; }

  // Removes the entries that must not run: past their client deadline, or past their queue
  // deadline with timeout_action REJECT. With DELAY, entries past their queue deadline move
  // behind every other entry instead.
  std::vector<Entry> TakeExpired(absl::Time now) {
    std::vector<Entry> expired;
    const bool delay = config_.queue_policy.timeout_action == QueuePolicy::TimeoutAction::kDelay;
    for (auto& level : levels_) {
      for (auto it = level.begin(); it != level.end();) {
        if (now >= it->client_deadline || (!delay && now >= it->queue_deadline)) {
          expired.push_back(std::move(*it));
        } else if (delay && now >= it->queue_deadline) {
          ++delayed_per_level_[it->level];
          delayed_.push_back(std::move(*it));
        } else {
          ++it;
          continue;
        }
        it = level.erase(it);
      }
    }
    for (auto it = delayed_.begin(); it != delayed_.end();) {
      if (now >= it->client_deadline) {
        --delayed_per_level_[it->level];
        expired.push_back(std::move(*it));
        it = delayed_.erase(it);
      } else {
        ++it;
      }
    }
    size_ -= expired.size();
    return expired;
  }

  // Removes the entries whose payload `dead` says no one waits for any more (e.g. a
  // cancelled call), wherever they wait.
  template <typename Dead>
  std::vector<Entry> TakeIf(Dead dead) {
    std::vector<Entry> taken;
    auto sweep = [&](std::deque<Entry>& q, bool delayed) {
      for (auto it = q.begin(); it != q.end();) {
        if (!dead(it->payload)) {
          ++it;
          continue;
        }
        if (delayed) --delayed_per_level_[it->level];
        taken.push_back(std::move(*it));
        it = q.erase(it);
      }
    };
    for (auto& level : levels_) sweep(level, false);
    sweep(delayed_, true);
    size_ -= taken.size();
    return taken;
  }

  // Forms the next batch (call TakeExpired first). The batch is led by the first entry in
  // service order and takes later entries of the same shape key, up to max_batch_size
  // (an `alone` entry leads a batch of one at once, and joins no other). It runs now if
  // it is full, if it reaches a preferred size (the largest one reached is used), if
  // `flush` is set, once its first entry has waited max_queue_delay, or (with
  // release_when_arrivals_are_sparse) once the rest of that wait is shorter than the mean
  // gap between arrivals.
  Decision Next(absl::Time now, bool flush = false) {
    Decision d;
    std::vector<std::pair<std::deque<Entry>*, size_t>> picks;
    const Entry* head = nullptr;
    const int max = config_.max_batch_size;
    ForEachInOrder([&](std::deque<Entry>& q, size_t i) {
      if (head == nullptr) head = &q[i];
      const bool joins = &q[i] == head || (!head->alone && !q[i].alone &&
                                           q[i].shape_key == head->shape_key);
      if (joins) picks.emplace_back(&q, i);
      return !head->alone && static_cast<int>(picks.size()) < max;
    });
    if (head == nullptr) return d;
    size_t take = picks.size();
    bool run = flush || head->alone || static_cast<int>(take) >= max;
    if (!run) {
      for (auto p = config_.preferred_batch_sizes.rbegin();
           p != config_.preferred_batch_sizes.rend(); ++p) {
        if (static_cast<int>(take) >= *p) {
          take = static_cast<size_t>(*p);
          run = true;
          break;
        }
      }
    }
    // The delay runs from the oldest request the batch would carry.
    absl::Time oldest = head->enqueued;
    for (const auto& [q, i] : picks) oldest = std::min(oldest, (*q)[i].enqueued);
    const absl::Time release = oldest + config_.max_queue_delay;
    // Released once the delay is over, or (early release) once the next arrival is
    // expected no sooner than that; ExpectedGap is zero without early release.
    const absl::Duration expected_gap = ExpectedGap();
    if (!run && now + expected_gap >= release) run = true;
    if (!run) {
      d.wake_at = std::min(release - expected_gap, EarliestExpiry());
      return d;
    }
    picks.resize(take);
    // picks are in service order: move them out in that order, then erase the moved-from
    // slots back to front within each queue so earlier indices stay valid.
    for (auto& [q, i] : picks) {
      if (q == &delayed_) --delayed_per_level_[(*q)[i].level];
      d.batch.push_back(std::move((*q)[i]));
    }
    std::sort(picks.begin(), picks.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    for (auto& [q, i] : picks) q->erase(q->begin() + static_cast<std::ptrdiff_t>(i));
    size_ -= d.batch.size();
    if (size_ > 0) d.wake_at = now;  // more may be ready at once
    return d;
  }

 private:
  int DefaultLevel() const {
    return config_.default_priority_level > 0 ? config_.default_priority_level - 1 : 0;
  }

  // Calls f(queue, index) over entries in service order while f returns true.
  template <typename F>
  void ForEachInOrder(F&& f) {
    for (auto& level : levels_) {
      for (size_t i = 0; i < level.size(); ++i) {
        if (!f(level, i)) return;
      }
    }
    for (size_t i = 0; i < delayed_.size(); ++i) {
      if (!f(delayed_, i)) return;
    }
  }

  // Mean gap between arrivals (exponentially weighted, 1/8 per arrival; the first gap,
  // from the queue's opening when known, seeds it). A gap counts up to twice the delay: any
  // longer gap says the same (no companion within the delay), and one idle minute must
  // not outweigh the next burst.
  void NoteArrival(absl::Time now) {
    if (!config_.release_when_arrivals_are_sparse) return;
    if (arrivals_ > 0) {
      const absl::Duration gap =
          std::min(std::max(now - last_arrival_, absl::ZeroDuration()),
                   2 * config_.max_queue_delay);
      mean_gap_ = arrivals_ == 1 ? gap : mean_gap_ + (gap - mean_gap_) / 8;
    }
    last_arrival_ = now;
    if (arrivals_ < 2) ++arrivals_;
  }

  // Zero (wait the whole delay) until a gap is known (two arrivals, or the opening and one
  // arrival); always zero when off, since NoteArrival then notes nothing.
  absl::Duration ExpectedGap() const { return arrivals_ >= 2 ? mean_gap_ : absl::ZeroDuration(); }

  absl::Time EarliestExpiry() const {
    absl::Time t = absl::InfiniteFuture();
    for (const auto& level : levels_) {
      for (const auto& e : level) {
        t = std::min(t, e.client_deadline);
        t = std::min(t, e.queue_deadline);  // REJECT drops it, DELAY demotes it
      }
    }
    for (const auto& e : delayed_) t = std::min(t, e.client_deadline);
    return t;
  }

  DynamicBatchingConfig config_;
  std::vector<std::deque<Entry>> levels_;
  std::deque<Entry> delayed_;
  std::vector<size_t> delayed_per_level_;  // entries of each level now in delayed_
  size_t size_ = 0;
  // Arrival statistics for release_when_arrivals_are_sparse.
  int arrivals_ = 0;  // counts to 2 only (the opening counts as one): whether mean_gap_ holds a gap
  absl::Time last_arrival_;
  absl::Duration mean_gap_ = absl::ZeroDuration();
};

}  // namespace gatescope
