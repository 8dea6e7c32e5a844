#include "client/report.h"

#include <iostream>
#include <string>

#include "client/json_writer.h"

namespace gatescope::client {

void Report::Print(std::string line) {
  std::cout << line << std::endl;
  lines_.push_back(std::move(line));
}

void Report::Success(std::string_view file, std::string_view members) {
  Print("{\"file\":" + JsonString(file) + std::string(members) + "}");
}

void Report::ServerFailure(std::string_view file, const absl::Status& status,
                           std::string_view model) {
  Failure(file, model, absl::StatusCodeToString(status.code()), std::string(status.message()));
}

void Report::ClientFailure(std::string_view file, const absl::Status& status,
                           std::string_view model) {
  Failure(file, model, "CLIENT", std::string(status.message()));
}

void Report::Failure(std::string_view file, std::string_view model, std::string_view code,
                     std::string_view message) {
  ++failures_;
  std::string line = "{\"file\":" + JsonString(file);
  if (!model.empty()) line += ",\"model\":" + JsonString(model);
  Print(line + ",\"error\":{\"code\":" + JsonString(code) +
        ",\"message\":" + JsonString(message) + "}}");
}

}  // namespace gatescope::client
