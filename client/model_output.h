// The TaskOutput of a command's model, chosen once per command from its metadata.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/options.h"
#include "client/report.h"
#include "client/task_output.h"
#include "gatescope/v1/inference.grpc.pb.h"

namespace gatescope::client {

// Fetches `target`'s metadata (blocking) and makes the TaskOutput of its task, with its
// name, served version and labels added to `settings` (and recorded in `report`). When the metadata call fails, every one of `inputs` fails
// with that error (printed to `report`) and the result is null; a task the client does
// not know is an error.
absl::StatusOr<std::unique_ptr<TaskOutput>> OpenTaskOutput(const InferenceClient& client,
                                                           const ModelTarget& target,
                                                           OutputSettings settings,
                                                           const std::vector<std::string>& inputs,
                                                           Report& report);

// Prints `file`'s line: a server failure if `response` is an error, else the members that
// `render(*response)` returns (a client failure if it fails).
template <typename Response, typename Render>
void ReportResponse(const std::string& file, const absl::StatusOr<Response>& response,
                    Render render, Report& report) {
  if (!response.ok()) return report.ServerFailure(file, response.status());
  const absl::StatusOr<std::string> members = render(*response);
  if (!members.ok()) return report.ClientFailure(file, members.status());
  report.Success(file, *members);
}

}  // namespace gatescope::client
