// TaskOutput of "image_classification" (classification_output.h). Predict prints
//   {"file":..., "label":..., "score":..., "topk":[{"label":..., "score":...}, ...]}.
// Explain writes, at <stem> = <out>/<file name> (a repeated name gets .2, .3, ...):
//   <stem>.panel.png    input | rollout | gate L<l> | res L<l> | plug L<l> (head-mean maps
//                       over the input; PLuG: the first gate row; only those asked for);
//   <stem>.rollout.png  the server's rollout overlay (with --rollout);
//   --format npy: <stem>.rollout.npy [gh,gw], .gates.npy [L,H,gh,gw], .resonance.npy,
//     .vigilance.npy [L,H], .attention.L<l>.npy and .attention_resonance.L<l>.npy [H,N,N],
//     .plug_gates.npy [L,queries,N], and <stem>.json (classes and the .npy names);
//   --format json: <stem>.json with the classes and every map as nested arrays;
// and prints {"file":..., "json":..., "panel":..., "png":..., "npy":[...], "label":...}.
#include "client/classification_output.h"
#include "client/file_io.h"
#include "client/json_writer.h"
#include "client/panel.h"
#include "client/task_output.h"

namespace gatescope::client {
namespace {

// Ranked classes; explanation files per input stem.
class ClassificationOutput : public TaskOutput {
 public:
  using TaskOutput::TaskOutput;

  absl::StatusOr<std::string> Predict(const InputImage&,
                                      const v1::PredictResponse& response) override {
    return TopClassesJson(response.classes());
  }

  absl::StatusOr<std::string> Explain(const InputImage& input, const v1::ExplainRequest& request,
                                      const v1::ExplainResponse& response) override;
};

absl::StatusOr<std::string> ClassificationOutput::Explain(const InputImage& input,
                                                          const v1::ExplainRequest& request,
                                                          const v1::ExplainResponse& response) {
  if (absl::Status st = CheckExplainResponse(response); !st.ok()) return st;
  const std::string stem = paths().Stem(input.file);
  absl::StatusOr<std::vector<std::string>> npy = std::vector<std::string>{};
  bool written = true;
  if (settings().json_maps) {
    written = WriteJsonOutput(input.file, stem, response).ok();
  } else {
    npy = WriteNpyOutputs(input.file, stem, request, response);
    written = npy.ok();
  }
  written &=
      WritePng(stem + ".panel.png", Rendered([&] {
                 return ExplainPanel(input.image, response, settings().model, settings().scale);
               }));
  std::string members =
      ",\"json\":" + JsonString(stem + ".json") + ",\"panel\":" + JsonString(stem + ".panel.png");
  if (!response.rollout_png().empty()) {
    written &= WriteBytes(stem + ".rollout.png", response.rollout_png());
    members += ",\"png\":" + JsonString(stem + ".rollout.png");
  }
  if (!written) {
    return absl::InternalError("cannot render or write results under " + settings().out_dir);
  }
  if (!npy->empty()) members += ",\"npy\":" + JsonStringArray(*npy);
  if (response.classes_size() > 0) {
    members += ",\"label\":" + JsonString(response.classes(0).label());
  }
  return members;
}

}  // namespace

extern const TaskFactory kClassificationOutput = &NewOutput<ClassificationOutput>;

}  // namespace gatescope::client
