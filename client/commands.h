// gatescope-client's commands. Each blocks until it is done, prints its JSON lines on stdout
// as it goes (report.h) and returns how it ended; a non-OK status means the command could
// not run at all (e.g. the output directory cannot be made, or the model's task is one the
// client cannot show), and main() prints it on stderr and exits 1. Every call goes over
// `server` (its channel and token).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/options.h"
#include "client/report.h"

namespace gatescope::client {

// predict.cc: one line per input, in order (the task's members, or an error).
absl::StatusOr<ExitCode> RunPredict(const Connection& server, const PredictOptions& options);

// explain.cc: one line per input naming the files written; with options.compare, RunCompare.
// Refuses an --out holding an earlier run unless --overwrite; writes run.json and
// index.html there at the end (run_record.h). predict does the same when it has an --out.
absl::StatusOr<ExitCode> RunExplain(const Connection& server, const ExplainOptions& options);

// compare.cc: per input <stem>.compare.png, each compared model's rollout over the input
// captioned "<model>: <top-1 label> <score>" (a grey "<model>: error" tile where it failed,
// with an error line naming the model), on one colour scale unless --scale tile. Expects
// options.out_dir to exist; prints to `report`.
absl::Status RunCompare(const Connection& server, const ExplainOptions& options,
                        Report& report);

// server_info.cc: one line per model (ListModels); the health of the server or of a
// model (kNotServing when it answers anything but SERVING); one line per service that
// server reflection lists. A failed call prints an error line and returns kInputFailed.
absl::StatusOr<ExitCode> RunModels(const Connection& server);
absl::StatusOr<ExitCode> RunHealth(const Connection& server, const HealthOptions& options);
absl::StatusOr<ExitCode> RunServices(const Connection& server);

}  // namespace gatescope::client
