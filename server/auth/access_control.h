// Bearer-token access control shared by the gRPC services and the /metrics endpoint. What a
// caller may do depends on the token it presents ("authorization: Bearer <token>"): tokens
// from the inference file may use health, metadata, inference and metrics; tokens from the
// admin file may also load and unload models. Categories listed as exempt need no token.
// Without any token file, access control is off and everything is open (the default, for
// loopback deployments). Immutable after Load; thread-safe. No gRPC, no HTTP here.
#pragma once

#include <array>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gatescope {

// The categories of calls, as Triton's --grpc-restricted-protocol names them.
enum class Access { kHealth, kMetadata, kInference, kMetrics, kModelControl };

struct AccessOptions {
  std::string tokens_file;        // inference tokens, one per line ('#' comments)
  std::string admin_tokens_file;  // model-control tokens (also allowed everything else)
  // Categories open without a token; kModelControl cannot be exempt. The grpc.health.v1
  // service (what Kubernetes probes call; they cannot send tokens) is always open.
  std::set<Access> exempt = {Access::kHealth};
};

// "health", "metadata", "inference", "metrics" -> the category; INVALID_ARGUMENT otherwise
// ("model_control" cannot be exempt).
absl::StatusOr<Access> ExemptAccessNamed(absl::string_view name);

class AccessControl {
 public:
  // Reads the token files. INVALID_ARGUMENT for an unreadable file, a file without tokens,
  // a token shorter than 16 characters or containing whitespace or control characters.
  // Only SHA-256 digests of the tokens are kept.
  static absl::StatusOr<std::unique_ptr<AccessControl>> Load(const AccessOptions& options);

  // Whether any token is required at all.
  bool enabled() const { return !inference_.empty() || !admin_.empty(); }

  // OK when `access` is exempt (or control is off) or `authorization` (the header's value,
  // "Bearer <token>") carries a token allowed it; UNAUTHENTICATED when no token or an
  // unknown one is presented; PERMISSION_DENIED when a known inference token asks for model
  // control. The comparison takes the same time whichever token, if any, matches.
  absl::Status Check(absl::string_view authorization, Access access) const;

 private:
  using Digest = std::array<unsigned char, 32>;
  AccessControl(std::vector<Digest> inference, std::vector<Digest> admin, std::set<Access> exempt)
      : inference_(std::move(inference)), admin_(std::move(admin)), exempt_(std::move(exempt)) {}
  static bool Matches(const std::vector<Digest>& digests, const Digest& presented);

  const std::vector<Digest> inference_;
  const std::vector<Digest> admin_;
  const std::set<Access> exempt_;
};

}  // namespace gatescope
