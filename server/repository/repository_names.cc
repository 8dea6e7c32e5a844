#include "server/repository/repository_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace gatescope {
namespace {

constexpr size_t kQuotedBytes = 64;

bool NameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-'; }

}  // namespace

absl::Status ValidateModelName(absl::string_view name) {
  bool ok = !name.empty() && name.size() <= kMaxModelNameBytes && name.front() != '.';
  for (char c : name) ok = ok && NameChar(c);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "bad model name ", QuoteName(name), ": 1 to ", kMaxModelNameBytes,
      " characters of A-Z a-z 0-9 _ . - not starting with '.'"));
}

bool IsVersionName(absl::string_view name) {
  if (name.empty() || name.size() > 18 || name.front() == '0') return false;
  for (char c : name) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

std::string QuoteName(absl::string_view text) {
  const absl::string_view shown = text.substr(0, kQuotedBytes);
  std::string quoted = absl::StrCat("'", absl::CHexEscape(shown), "'");
  if (shown.size() < text.size()) absl::StrAppend(&quoted, "... (", text.size(), " bytes)");
  return quoted;
}

absl::Status HideRepositoryPath(const absl::Status& status,
                                const std::vector<std::string>& roots) {
  if (status.ok()) return status;
  std::string message(status.message());
  for (const std::string& root : roots) {
    if (root.empty() || root == "/") continue;
    message = absl::StrReplaceAll(message, {{root, "<repository>"}});
  }
  return absl::Status(status.code(), message);
}

}  // namespace gatescope
