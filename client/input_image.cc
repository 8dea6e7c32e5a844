#include "client/input_image.h"

#include <iostream>
#include <iterator>

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

absl::StatusOr<InputImage> ReadText(const TextArg& arg) {
  InputImage input;
  input.file = arg.name;
  input.text = true;
  if (arg.path.empty()) {
    input.bytes = arg.value;
  } else if (arg.path == "-") {
    input.bytes.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return absl::NotFoundError("cannot read standard input");
  } else if (!ReadFile(arg.path, input.bytes)) {
    return absl::NotFoundError("cannot read file");
  }
  return input;
}

absl::StatusOr<InputImage> ReadCommandInput(const std::vector<std::string>& files,
                                            const std::vector<TextArg>& texts, size_t i,
                                            bool decode) {
  if (!texts.empty()) return ReadText(texts.at(i));
  return decode ? ReadImage(files.at(i)) : ReadInput(files.at(i));
}

}  // namespace gatescope::client
