#include "client/output_paths.h"

#include <filesystem>
#include <system_error>

namespace gatescope::client {

absl::Status MakeOutDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return absl::FailedPreconditionError("cannot create the output directory " + dir +
                                         (ec ? ": " + ec.message() : ""));
  }
  return absl::OkStatus();
}

std::string OutputPaths::Stem(const std::string& file) {
  const std::string base = std::filesystem::path(file).filename().string();
  std::string stem = (std::filesystem::path(out_dir_) / base).string();
  for (int n = 2; used_.count(stem); ++n) {
    stem = (std::filesystem::path(out_dir_) / (base + "." + std::to_string(n))).string();
  }
  used_.insert(stem);
  return stem;
}

std::string OutputPaths::Prefix(const std::string& file) {
  if (!several_inputs_) return (std::filesystem::path(out_dir_) / "").string();
  return Stem(file) + ".";
}

}  // namespace gatescope::client
