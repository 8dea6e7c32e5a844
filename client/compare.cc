// gatescope-client explain --compare: see commands.h.
#include <memory>

#include "client/commands.h"
#include "client/connection.h"
#include "client/file_io.h"
#include "client/input_image.h"
#include "client/json_writer.h"
#include "client/map_tensors.h"
#include "client/output_paths.h"
#include "client/panel.h"
#include "client/requests.h"

namespace gatescope::client {
namespace {

// The comparison panel of one input as it is built: a tile and caption per model.
struct ComparePanel {
  cv::Mat image;
  cv::Size tile;
  std::vector<cv::Mat> tiles;
  std::vector<std::string> captions;
  std::string models_json;  // {"model":..., "label":...} of each model drawn, comma-separated
};

// OK if `response` holds a well-formed rollout.
absl::Status CheckRollout(const v1::ExplainResponse& response) {
  if (!response.has_rollout()) return absl::DataLossError("no rollout in the response");
  return CheckMap(response.rollout(), 2, "rollout");
}

// Adds `model`'s rollout of `input` to `panel`, or a grey error tile (and an error line).
void AddModel(const InferenceClient& client, const ExplainOptions& options,
              const std::string& model, const InputImage& input, ComparePanel& panel,
              Report& report) {
  v1::ExplainRequest request = RolloutRequestFor(options, model, input.bytes);
  request.set_rollout(true);
  const absl::StatusOr<v1::ExplainResponse> response =
      CallExplain(client, request, options.target.timeout_ms);
  const absl::Status failure = response.ok() ? CheckRollout(*response) : response.status();
  if (!failure.ok()) {
    if (response.ok()) {
      report.ClientFailure(input.file, failure, model);
    } else {
      report.ServerFailure(input.file, failure, model);
    }
    panel.tiles.push_back(cv::Mat(panel.tile, CV_8UC3, cv::Scalar(48, 48, 48)));
    panel.captions.push_back(model + ": error");
    return;
  }
  const std::string label = response->classes_size() ? response->classes(0).label() : "";
  panel.tiles.push_back(
      Rendered([&] { return OverlayTile(input.image, GridMat(response->rollout()), panel.tile); }));
  panel.captions.push_back(model + ": " + label);
  panel.models_json += (panel.models_json.empty() ? "" : ",") + std::string("{\"model\":") +
                       JsonString(model) + ",\"label\":" + JsonString(label) + "}";
}

void CompareOne(const InferenceClient& client, const ExplainOptions& options,
                const std::string& file, OutputPaths& paths, Report& report) {
  const absl::StatusOr<InputImage> input = ReadImage(file);
  if (!input.ok()) return report.ClientFailure(file, input.status());
  ComparePanel panel;
  panel.tile = TileSize(input->image.size());
  panel.tiles = {InputTile(input->image, panel.tile)};
  panel.captions = {"input"};
  for (const std::string& model : options.compare) {
    AddModel(client, options, model, *input, panel, report);
  }
  const std::string path = paths.Stem(file) + ".compare.png";
  if (!WritePng(path, Rendered([&] { return ComposePanel(panel.tiles, panel.captions); }))) {
    return report.ClientFailure(file, absl::InternalError("cannot render or write " + path));
  }
  report.Success(file,
                 ",\"compare\":" + JsonString(path) + ",\"models\":[" + panel.models_json + "]");
}

}  // namespace

absl::StatusOr<ExitCode> RunCompare(const Connection& server, const ExplainOptions& options) {
  const InferenceClient client(server);
  OutputPaths paths(options.out_dir, options.files.size() > 1);
  Report report;
  for (const std::string& file : options.files) CompareOne(client, options, file, paths, report);
  return report.exit_code();
}

}  // namespace gatescope::client
