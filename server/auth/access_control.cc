#include "server/auth/access_control.h"

// OpenSSL (Debian's libssl, already in the process through gRPC) provides the digest and the
// constant-time comparison: neither is something to hand-write.
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gatescope {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr absl::string_view kBearer = "Bearer ";

std::array<unsigned char, 32> Sha256(absl::string_view text) {
  std::array<unsigned char, 32> digest;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

absl::Status ReadTokens(const std::string& path, std::vector<std::array<unsigned char, 32>>& out) {
  if (path.empty()) return absl::OkStatus();
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read token file ", path));
  std::stringstream text;
  text << in.rdbuf();
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n')) {
    ++line_number;
    const absl::string_view token = absl::StripAsciiWhitespace(line);
    if (token.empty() || token[0] == '#') continue;
    for (char c : token) {
      if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c))) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", line_number, ": a token may not contain whitespace or control characters"));
      }
    }
    if (token.size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": tokens must have at least ",
                                                     kMinTokenLength, " characters"));
    }
    out.push_back(Sha256(token));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("no tokens in ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Access> ExemptAccessNamed(absl::string_view name) {
  if (name == "health") return Access::kHealth;
  if (name == "metadata") return Access::kMetadata;
  if (name == "inference") return Access::kInference;
  if (name == "metrics") return Access::kMetrics;
  return absl::InvalidArgumentError(absl::StrCat(
      "'", name, "' is not a category that can be exempt (health, metadata, inference, metrics)"));
}

absl::StatusOr<std::unique_ptr<AccessControl>> AccessControl::Load(const AccessOptions& options) {
  if (options.exempt.count(Access::kModelControl) > 0) {
    return absl::InvalidArgumentError("model control cannot be exempt from authentication");
  }
  std::vector<Digest> inference, admin;
  if (absl::Status st = ReadTokens(options.tokens_file, inference); !st.ok()) return st;
  if (absl::Status st = ReadTokens(options.admin_tokens_file, admin); !st.ok()) return st;
  return std::unique_ptr<AccessControl>(
      new AccessControl(std::move(inference), std::move(admin), options.exempt));
}

bool AccessControl::Matches(const std::vector<Digest>& digests, const Digest& presented) {
  int matched = 0;  // every digest is compared, so the time does not say which one matched
  for (const Digest& d : digests) {
    matched |= CRYPTO_memcmp(d.data(), presented.data(), d.size()) == 0 ? 1 : 0;
  }
  return matched != 0;
}

absl::Status AccessControl::Check(absl::string_view authorization, Access access) const {
  if (!enabled() || exempt_.count(access) > 0) return absl::OkStatus();
  if (!absl::StartsWithIgnoreCase(authorization, kBearer)) {
    return absl::UnauthenticatedError("a bearer token is required (authorization: Bearer <token>)");
  }
  const Digest presented = Sha256(absl::StripAsciiWhitespace(authorization.substr(kBearer.size())));
  const bool admin = Matches(admin_, presented);
  const bool inference = Matches(inference_, presented);
  if (admin) return absl::OkStatus();
  if (!inference) return absl::UnauthenticatedError("the bearer token is not valid");
  if (access == Access::kModelControl) {
    return absl::PermissionDeniedError("model control needs an admin token");
  }
  return absl::OkStatus();
}

}  // namespace gatescope
