// Third-party libraries that write a log line per bad request (protobuf: one ERROR line for
// each message with invalid UTF-8 in a string field) would let any client flood the server's
// log. Their lines go through a rate limiter: at most one line per interval, then a count of
// what was dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/clock.h"

namespace gatescope {

class LogRateLimiter {
 public:
  // `clock` is not owned and must outlive the limiter.
  LogRateLimiter(const Clock* clock, absl::Duration interval)
      : clock_(clock), interval_(interval) {}

  // The line to write now (with the number of lines dropped since the last one written,
  // if any), or nullopt when `line` is to be dropped. Thread-safe.
  std::optional<std::string> Admit(absl::string_view line);

 private:
  const Clock* const clock_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Routes protobuf's log lines below FATAL through one LogRateLimiter (one line per 10 s) into
// the server's log. Call once, before serving; the limiter lives for the process.
void LimitProtobufLogs(const Clock* clock);

}  // namespace gatescope
