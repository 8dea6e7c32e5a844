// The JSON lines a command prints on stdout and the exit status they add up to.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace gatescope::client {

// How a command ended; main() returns it. Usage errors (exit 2) never reach a command, and
// a command that cannot run at all returns a non-OK absl::Status instead (exit 1).
enum class ExitCode {
  kOk = 0,
  kInputFailed = 2,  // at least one input (or the command's only call) failed
  kNotServing = 3,   // health: the server or model answered, but is not SERVING
};

// Prints one line per input to stdout as the command goes, and counts failures. Not
// thread-safe: one command, one thread.
class Report {
 public:
  // {"file":<file><members>}: `members` are JSON members, each after a comma.
  void Success(std::string_view file, std::string_view members);

  // {"file":<file>,"error":{"code":<code name>,"message":...}}, with ,"model":<model> after
  // the file when `model` is not empty. ServerFailure names the status's code (a server's
  // answer, converted with FromGrpc); ClientFailure prints code "CLIENT" (the client's own
  // failure: a file not read, a response it cannot render, a picture not written).
  void ServerFailure(std::string_view file, const absl::Status& status,
                     std::string_view model = {});
  void ClientFailure(std::string_view file, const absl::Status& status,
                     std::string_view model = {});

  int failures() const { return failures_; }
  ExitCode exit_code() const { return failures_ ? ExitCode::kInputFailed : ExitCode::kOk; }

  // The model the command talks to, as its metadata named it (for the run record).
  void SetModel(std::string model, std::string version, std::string task) {
    model_ = std::move(model);
    version_ = std::move(version);
    task_ = std::move(task);
  }
  const std::string& model() const { return model_; }
  const std::string& version() const { return version_; }
  const std::string& task() const { return task_; }

  // Every line printed so far, in order (each one JSON object).
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  void Print(std::string line);
  void Failure(std::string_view file, std::string_view model, std::string_view code,
               std::string_view message);

  int failures_ = 0;
  std::string model_, version_, task_;
  std::vector<std::string> lines_;
};

}  // namespace gatescope::client
