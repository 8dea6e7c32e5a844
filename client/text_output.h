// What gatescope-client writes for text models ("text_classification"): the predict line's
// members, and an explanation as a self-contained HTML page (the request text shaded by
// each piece's rollout, gate heatmaps per layer), a JSON file and .npy maps; the --compare
// page (one row per model over the same text). Uses the gatescope.v1 messages, no channel.
// See docs/text_client.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/input_image.h"
#include "client/scale_mode.h"
#include "client/task_output.h"
#include "client/text_view.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

// JSON members of a predict line, each after a comma: TopClassesJson, then "tokens" (the
// pieces the model read), "truncated" (whether the text has more) and "chars_read" (the
// characters of the text those pieces cover).
std::string TextPredictJson(const ::gatescope::v1::PredictResponse& response);

// OK if `response` describes `text` consistently: each piece within the text's code points
// (begin <= end), the shown pieces in text order; rollout FLOAT32 [T] for the T pieces (when
// present, or always with `need_rollout`); gates FLOAT32 [H, T] of one shape per layer;
// attention FLOAT32 [heads, queries, T + 1]. Else DATA_LOSS saying what is not.
absl::Status CheckTextExplain(const ::gatescope::v1::ExplainResponse& response,
                              std::string_view text, bool need_rollout = false);

// The pieces of a checked `response`, each with its rollout value (0 without a rollout).
std::vector<ShadedPiece> RolloutPieces(const ::gatescope::v1::ExplainResponse& response);

// "truncated: the model read the first N of M tokens" of a truncated text; "" otherwise.
std::string TruncatedNote(const ::gatescope::v1::TextInput& text);

// The gate of every layer of a checked `response` as a heatmap picture (TokenHeatmap: heads
// x pieces), on one scale across layers (kShared) or each its own (kTile); none without
// gates.
std::vector<cv::Mat> GateHeatmaps(const ::gatescope::v1::ExplainResponse& response,
                                  const std::string& model, ScaleMode scale);

// Who answered an explanation: the model's name and the version that answered.
struct TextModelInfo {
  std::string model, version;
};

// The explanation page of the text input `name` (a checked `response` to `text`): model,
// version, prediction, the truncation note, the text shaded by rollout with its colour bar,
// then `gate_pictures` (GateHeatmaps) inline.
std::string TextExplainPage(const std::string& name, std::string_view text,
                            const ::gatescope::v1::ExplainResponse& response,
                            const TextModelInfo& info, const std::vector<cv::Mat>& gate_pictures,
                            ScaleMode scale);

// Writes the explanation of text `input` at `stem` (= <out>/<name>): <stem>.html
// (TextExplainPage), <stem>.json (classes, pieces with offsets, rollout and gates; every
// map with settings.json_maps), the maps as <stem>.rollout.npy [T], .gates.npy [L, H, T],
// .attention.L<l>.npy [heads, queries, T + 1] (not with json_maps) and <stem>.gates.png
// (the gate heatmaps one under another). Returns the line's members naming them.
absl::StatusOr<std::string> WriteTextExplain(const InputImage& input, const std::string& stem,
                                             const ::gatescope::v1::ExplainRequest& request,
                                             const ::gatescope::v1::ExplainResponse& response,
                                             const OutputSettings& settings);

// One row of a text comparison: a model's checked explanation, or its error.
struct TextCompareRow {
  TextModelInfo info;
  const ::gatescope::v1::ExplainResponse* response = nullptr;  // null: failed
  std::string error;                                             // why, when failed
};

// The comparison page of the text input `name`: a row per model (its name, version,
// prediction and pieces read) with the text shaded by that model's rollout, cut by its own
// pieces; one colour scale across the models (kShared, its bar on top) or per row (kTile,
// a bar in each row).
std::string TextComparePage(const std::string& name, std::string_view text,
                            const std::vector<TextCompareRow>& rows, ScaleMode scale);

}  // namespace gatescope::client
