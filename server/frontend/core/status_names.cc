#include "server/frontend/core/status_names.h"

#include "absl/strings/ascii.h"

namespace gatescope {

std::string StatusCodeName(absl::StatusCode code) {
  return absl::AsciiStrToUpper(absl::StatusCodeToString(code));
}

}  // namespace gatescope
