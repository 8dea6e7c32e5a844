// TaskOutput of "text_classification" (text_output.h; docs/text_client.md). Inputs are texts
// (--text, --text-file). Predict prints
//   {"file":..., "label":..., "score":..., "topk":[...], "tokens":M, "truncated":false,
//    "chars_read":C}
// (M: the pieces the model read; C: the characters of the text they cover). Explain always
// asks for the rollout, and for the gates when the model declares "gate" maps, and writes
// at <stem> = <out>/<name>:
//   <stem>.html       a self-contained page: model, version, prediction, the text shaded by
//                     each piece's rollout (hover: piece, id, value) with its colour bar,
//                     the truncation note, the gate heatmaps (heads x pieces) per layer;
//   <stem>.gates.png  those heatmaps one under another (models with gates);
//   <stem>.json       classes, pieces with their character offsets, rollout and gates;
//   --format npy: <stem>.rollout.npy [T], .gates.npy [L,H,T], .attention.L<l>.npy
//     [heads,queries,T+1];  --format json: the attention maps in <stem>.json instead;
// and prints {"file":..., "page":..., "json":..., "gate_heatmaps":..., "npy":[...],
// "label":..., "score":..., "tokens":M, "truncated":..., "chars_read":C}.
#include <algorithm>

#include "client/task_output.h"
#include "client/text_output.h"

namespace gatescope::client {
namespace {

class TextClassificationOutput : public TaskOutput {
 public:
  using TaskOutput::TaskOutput;

  void CompleteExplainRequest(v1::ExplainRequest& request) const override {
    request.set_rollout(true);  // the page shades the text by it
    request.set_heatmap_png(false);
    const std::vector<std::string>& maps = settings().maps;
    if (std::find(maps.begin(), maps.end(), "gate") != maps.end()) request.set_gates(true);
  }

  absl::StatusOr<std::string> Predict(const InputImage&,
                                      const v1::PredictResponse& response) override {
    return TextPredictJson(response);
  }

  absl::StatusOr<std::string> Explain(const InputImage& input, const v1::ExplainRequest& request,
                                      const v1::ExplainResponse& response) override {
    if (!input.text) {
      return absl::InvalidArgumentError("a text model explains texts (--text, --text-file)");
    }
    return WriteTextExplain(input, paths().Stem(input.file), request, response, settings());
  }
};

}  // namespace

extern const TaskFactory kTextClassificationOutput = &NewOutput<TextClassificationOutput>;

}  // namespace gatescope::client
