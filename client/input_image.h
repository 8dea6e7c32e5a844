// One input file of a command, read and decoded.
#pragma once

#include <opencv2/core.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace gatescope::client {

struct InputImage {
  std::string file;   // as named on the command line
  std::string bytes;  // the file's contents, sent as they are
  cv::Mat image;      // decoded 8-bit BGR; empty for raw tensors (not decoded)
};

// `file`'s bytes, not decoded; an error if it cannot be read.
absl::StatusOr<InputImage> ReadInput(const std::string& file);

// `file`'s bytes and its decoded image; an error if it cannot be read or decoded.
absl::StatusOr<InputImage> ReadImage(const std::string& file);

}  // namespace gatescope::client
