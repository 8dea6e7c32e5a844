// TaskOutput of "image_segmentation" (segmentation_output.h). Predict prints
//   {"file":..., "height":H0, "width":W0, "class_pixels":{"<label>":pixels, ...}}
// and with --out writes mask.png (the classes over the input, with a legend), mask_raw.png
// (class indices) and, with --probabilities, probabilities.npy [classes, H0, W0]. Explain
// writes mask.png, gates.png / gate.s<k>.npy (--gates) and query_attention.png /
// query_attention.s<k>.npy (--query) and names them. File names start with <out>/ for one
// input, <out>/<file name>. for several.
#include "client/segmentation_output.h"
#include "client/task_output.h"
#include "server/common/status_macros.h"

namespace gatescope::client {
namespace {

// Class maps and per-stage maps; labels come from the model's metadata.
class SegmentationOutput : public TaskOutput {
 public:
  using TaskOutput::TaskOutput;

  absl::StatusOr<std::string> Predict(const InputImage& input,
                                      const v1::PredictResponse& response) override {
    std::string members = SegmentationJson(response.segmentation(), settings().labels);
    if (settings().out_dir.empty()) return members;
    GS_RETURN_IF_ERROR(WritePredictFiles(paths().Prefix(input.file), input.image,
                                         response.segmentation(), settings().labels, members));
    return members;
  }

  absl::StatusOr<std::string> Explain(const InputImage& input, const v1::ExplainRequest&,
                                      const v1::ExplainResponse& response) override {
    std::string members = SegmentationJson(response.segmentation(), settings().labels);
    GS_RETURN_IF_ERROR(
        WriteExplainFiles(paths().Prefix(input.file), input.image, response, settings(), members));
    return members;
  }
};

}  // namespace

extern const TaskFactory kSegmentationOutput = &NewOutput<SegmentationOutput>;

}  // namespace gatescope::client
