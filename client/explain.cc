// gatescope-client explain: see commands.h.
#include <memory>

#include "client/commands.h"
#include "client/connection.h"
#include "client/input_image.h"
#include "client/model_output.h"
#include "client/output_paths.h"
#include "client/requests.h"
#include "client/run_record.h"
#include "server/common/status_macros.h"

namespace gatescope::client {
namespace {

OutputSettings SettingsOf(const ExplainOptions& options) {
  OutputSettings settings;
  settings.out_dir = options.out_dir;
  settings.several_inputs = options.files.size() > 1;
  settings.json_maps = options.json_maps;
  settings.scale = options.scale;
  if (options.query) {
    settings.query.emplace();
    settings.query->set_y(options.query->y);
    settings.query->set_x(options.query->x);
  }
  return settings;
}

void ExplainOne(const InferenceClient& client, const ExplainOptions& options, size_t i,
                TaskOutput& task, Report& report) {
  const std::string& file = options.files[i];
  const absl::StatusOr<InputImage> input =
      ReadCommandInput(options.files, options.texts, i, /*decode=*/true);
  if (!input.ok()) return report.ClientFailure(file, input.status());
  v1::ExplainRequest request = ExplainRequestFor(options, *input);
  task.CompleteExplainRequest(request);
  ReportResponse(
      file, CallExplain(client, request, options.target.timeout_ms),
      [&](const v1::ExplainResponse& response) { return task.Explain(*input, request, response); },
      report);
}

// Explains every input with one model.
absl::Status ExplainAll(const Connection& server, const ExplainOptions& options, Report& report) {
  const InferenceClient client(server);
  GS_ASSIGN_OR_RETURN(
      std::unique_ptr<TaskOutput> task,
      OpenTaskOutput(client, options.target, SettingsOf(options), options.files, report));
  if (task == nullptr) return absl::OkStatus();  // the metadata call failed every input
  for (size_t i = 0; i < options.files.size(); ++i) ExplainOne(client, options, i, *task, report);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExitCode> RunExplain(const Connection& server, const ExplainOptions& options) {
  GS_RETURN_IF_ERROR(MakeOutDir(options.out_dir));
  GS_RETURN_IF_ERROR(ClaimOutDir(options.out_dir, options.run.overwrite));
  Report report;
  if (options.compare.empty()) {
    GS_RETURN_IF_ERROR(ExplainAll(server, options, report));
  } else {
    GS_RETURN_IF_ERROR(RunCompare(server, options, report));
  }
  GS_RETURN_IF_ERROR(WriteRunRecord(options.out_dir, options.run, report));
  return report.exit_code();
}

}  // namespace gatescope::client
