#include "server/app/library_logs.h"

#include <google/protobuf/stubs/logging.h>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"

namespace gatescope {

std::optional<std::string> LogRateLimiter::Admit(absl::string_view line) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (now - last_ < interval_) {
    ++dropped_;
    return std::nullopt;
  }
  last_ = now;
  std::string out(line);
  if (dropped_ > 0) absl::StrAppend(&out, " (", dropped_, " similar lines dropped)");
  dropped_ = 0;
  return out;
}

namespace {

LogRateLimiter* g_protobuf_limiter = nullptr;  // set once by LimitProtobufLogs, never freed

void ProtobufLog(google::protobuf::LogLevel level, const char* file, int line,
                 const std::string& message) {
  if (level == google::protobuf::LOGLEVEL_FATAL) {
    GS_LOG(FATAL) << "protobuf " << file << ":" << line << ": " << message;
    return;
  }
  if (auto admitted = g_protobuf_limiter->Admit(absl::StrCat("protobuf: ", message))) {
    GS_LOG(WARNING) << *admitted;
  }
}

}  // namespace

void LimitProtobufLogs(const Clock* clock) {
  if (g_protobuf_limiter != nullptr) return;
  g_protobuf_limiter = new LogRateLimiter(clock, absl::Seconds(10));
  google::protobuf::SetLogHandler(&ProtobufLog);
}

}  // namespace gatescope
