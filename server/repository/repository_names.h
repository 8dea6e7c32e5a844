// What may name a model or a version in the repository, and how a name a client sent is
// quoted back in an error. Names become directory names and Prometheus label values and are
// echoed to clients, so they are kept to a portable, printable set.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gatescope {

inline constexpr size_t kMaxModelNameBytes = 128;

// OK for 1..128 bytes of [A-Za-z0-9_.-] not starting with '.'; INVALID_ARGUMENT (the name
// quoted) otherwise: NUL and other control bytes, '/', "..", spaces, non-ASCII.
absl::Status ValidateModelName(absl::string_view name);

// A version directory name: a positive decimal integer without leading zeros, as Triton's
// repository layout requires ("1", "10"; not "01", "1.bak", "latest").
bool IsVersionName(absl::string_view name);

// `text` in single quotes for an error message: non-printable bytes escaped (\x00) and,
// beyond 64 bytes, cut with the full length said, so that a hostile name cannot make the
// error larger than the request or hide characters.
std::string QuoteName(absl::string_view text);

// `status` with every occurrence of `root` (the repository's path, as configured or
// resolved) in its message replaced by "<repository>": loaders and libraries name the files
// they failed on, and load errors reach any client that may read model metadata.
absl::Status HideRepositoryPath(const absl::Status& status,
                                const std::vector<std::string>& roots);

}  // namespace gatescope
