#include "server/runtime/op_library.h"

#include <dlfcn.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gatescope {

absl::Status LoadOpLibrary(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    return absl::NotFoundError(absl::StrCat("op library not found: ", path));
  }
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot load op library ", path, ": ", dlerror()));
  }
  return absl::OkStatus();
}

}  // namespace gatescope
