// Loading of custom-op shared libraries (registering TORCH_LIBRARY ops) into the process.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gatescope {

// dlopen()s `path` with RTLD_NOW | RTLD_GLOBAL; the library stays loaded for the life of
// the process. Must run before loading any model that calls its ops. Thread-compatible.
// NOT_FOUND if the file is missing, INTERNAL with dlerror() text otherwise.
absl::Status LoadOpLibrary(const std::string& path);

}  // namespace gatescope
