#include "client/input_image.h"

#include "client/file_io.h"
#include "client/panel.h"

namespace gatescope::client {

absl::StatusOr<InputImage> ReadInput(const std::string& file) {
  InputImage input;
  input.file = file;
  if (!ReadFile(file, input.bytes)) return absl::NotFoundError("cannot read file");
  return input;
}

absl::StatusOr<InputImage> ReadImage(const std::string& file) {
  absl::StatusOr<InputImage> input = ReadInput(file);
  if (!input.ok()) return input;
  input->image = DecodeBgr(input->bytes);
  if (input->image.empty()) return absl::InvalidArgumentError("cannot decode the image");
  return input;
}

}  // namespace gatescope::client
