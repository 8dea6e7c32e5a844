#include "server/app/server_options.h"

#include "absl/strings/str_cat.h"

namespace gatescope {
namespace {

absl::Status OutOfRange(const char* name, const std::string& value, const char* range) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, " = ", value, " is out of range (", range, ")"));
}

}  // namespace

absl::Status ValidateServerOptions(const ServerOptions& o) {
  if (o.model_repository.empty()) return absl::InvalidArgumentError("model_repository is empty");
  if (o.grpc_port < 0 || o.grpc_port > 65535) {
    return OutOfRange("grpc_port", absl::StrCat(o.grpc_port), "0..65535");
  }
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return OutOfRange("metrics_port", absl::StrCat(o.metrics_port), "-1..65535");
  }
  if (o.torch_threads < 0 || o.torch_threads > 1024) {
    return OutOfRange("torch_threads", absl::StrCat(o.torch_threads), "0..1024");
  }
  const ServingDefaults& d = o.defaults;
  if (d.max_batch_size < 1 || d.max_batch_size > 4096) {
    return OutOfRange("max_batch_size", absl::StrCat(d.max_batch_size), "1..4096");
  }
  if (d.max_queue_size < 1) return OutOfRange("max_queue_size", absl::StrCat(d.max_queue_size), ">= 1");
  if (d.max_queue_delay < absl::ZeroDuration() || d.max_queue_delay > absl::Seconds(60)) {
    return OutOfRange("max_queue_delay", absl::FormatDuration(d.max_queue_delay), "0..60s");
  }
  if (d.instances < 1 || d.instances > 64) {
    return OutOfRange("instances", absl::StrCat(d.instances), "1..64");
  }
  if (o.repository_poll_interval <= absl::ZeroDuration()) {
    return OutOfRange("repository_poll_interval",
                      absl::FormatDuration(o.repository_poll_interval), "> 0");
  }
  if (o.drain_timeout < absl::ZeroDuration()) {
    return OutOfRange("drain_timeout", absl::FormatDuration(o.drain_timeout), ">= 0");
  }
  if (o.explain_max_bytes < 1) {
    return OutOfRange("explain_max_bytes", absl::StrCat(o.explain_max_bytes), ">= 1");
  }
  if (o.max_message_bytes < 1024 || o.max_message_bytes > (1 << 30)) {
    return OutOfRange("max_message_bytes", absl::StrCat(o.max_message_bytes), "1 KiB..1 GiB");
  }
  return absl::OkStatus();
}

}  // namespace gatescope
