// gatescope-client predict: see commands.h.
#include <memory>

#include "client/commands.h"
#include "client/connection.h"
#include "client/input_image.h"
#include "client/model_output.h"
#include "client/output_paths.h"
#include "client/panel.h"
#include "client/requests.h"
#include "client/run_record.h"
#include "server/common/status_macros.h"

namespace gatescope::client {
namespace {

void PredictOne(const InferenceClient& client, const PredictOptions& options, size_t i,
                TaskOutput& task, Report& report) {
  const std::string& file = options.files[i];
  absl::StatusOr<InputImage> input =
      ReadCommandInput(options.files, options.texts, i, /*decode=*/false);
  if (!input.ok()) return report.ClientFailure(file, input.status());
  // Pictures of the results need the decoded input; raw tensors and texts have none.
  if (!options.out_dir.empty() && options.raw_shape.empty() && !input->text) {
    input->image = DecodeBgr(input->bytes);
  }
  const v1::PredictRequest request = PredictRequestFor(options, *input);
  ReportResponse(
      file, CallPredict(client, request, options.target.timeout_ms),
      [&](const v1::PredictResponse& response) { return task.Predict(*input, response); }, report);
}

}  // namespace

absl::StatusOr<ExitCode> RunPredict(const Connection& server, const PredictOptions& options) {
  const bool writes = !options.out_dir.empty();
  if (writes) {
    GS_RETURN_IF_ERROR(MakeOutDir(options.out_dir));
    GS_RETURN_IF_ERROR(ClaimOutDir(options.out_dir, options.run.overwrite));
  }
  const InferenceClient client(server);
  OutputSettings settings;
  settings.out_dir = options.out_dir;
  settings.several_inputs = options.files.size() > 1;
  Report report;
  GS_ASSIGN_OR_RETURN(std::unique_ptr<TaskOutput> task,
                      OpenTaskOutput(client, options.target, settings, options.files, report));
  if (task != nullptr) {  // else the metadata call failed every input
    for (size_t i = 0; i < options.files.size(); ++i) PredictOne(client, options, i, *task, report);
  }
  if (writes) GS_RETURN_IF_ERROR(WriteRunRecord(options.out_dir, options.run, report));
  return report.exit_code();
}

}  // namespace gatescope::client
