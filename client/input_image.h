// One input of a command: a file read (and decoded), or a text of a text model.
#pragma once

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/options.h"

namespace gatescope::client {

struct InputImage {
  std::string file;   // as named on the command line (a text: TextArg::name)
  std::string bytes;  // the file's contents, sent as they are (a text: its UTF-8 bytes)
  cv::Mat image;      // decoded 8-bit BGR; empty for raw tensors (not decoded) and texts
  bool text = false;  // `bytes` is a text for a text model, sent as the request's text
};

// `file`'s bytes, not decoded; an error if it cannot be read.
absl::StatusOr<InputImage> ReadInput(const std::string& file);

// `file`'s bytes and its decoded image; an error if it cannot be read or decoded.
absl::StatusOr<InputImage> ReadImage(const std::string& file);

// The text of `arg` (its value, or its file's whole contents; "-": all of standard input),
// named arg.name; an error if the file cannot be read. The bytes are sent as they are
// (the server checks that they are UTF-8).
absl::StatusOr<InputImage> ReadText(const TextArg& arg);

// Input `i` of a command whose inputs are `texts`, or when there are none the image files
// `files`: ReadText, else ReadImage (`decode`) or ReadInput.
absl::StatusOr<InputImage> ReadCommandInput(const std::vector<std::string>& files,
                                            const std::vector<TextArg>& texts, size_t i,
                                            bool decode);

}  // namespace gatescope::client
