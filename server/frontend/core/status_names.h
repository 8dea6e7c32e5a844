// Status code names as the metrics label them, for every frontend.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gatescope {

// Upper-case code name used as the metrics label, e.g. "INVALID_ARGUMENT".
std::string StatusCodeName(absl::StatusCode code);

}  // namespace gatescope
