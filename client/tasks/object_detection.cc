// TaskOutput of "object_detection" (detection_output.h). Predict prints
//   {"file":..., "detections":[{"label":..., "label_index":..., "score":...,
//    "box":[x1,y1,x2,y2], "query":...}, ...]}   (boxes in the input's pixels)
// and with --out writes boxes.png (the boxes over the input). Explain writes
// sampling_points.png (each detection's box and its last decoder layer's sampling points),
// detection<i>.{sampling_points,attention_weights,plug_gate}.npy and, with --plug-gates,
// encoder_plug_gates.png / encoder_plug_gate.e<e>.k<k>.npy, and names them. File names
// start with <out>/ for one input, <out>/<file name>. for several.
#include "client/detection_output.h"
#include "client/task_output.h"
#include "server/common/status_macros.h"

namespace gatescope::client {
namespace {

// Detections; pictures only of encoded inputs (raw tensors have none).
class DetectionOutput : public TaskOutput {
 public:
  using TaskOutput::TaskOutput;

  absl::StatusOr<std::string> Predict(const InputImage& input,
                                      const v1::PredictResponse& response) override {
    std::string members = DetectionsJson(response.detections());
    if (settings().out_dir.empty()) return members;
    GS_RETURN_IF_ERROR(WriteDetectionPicture(paths().Prefix(input.file), input.image,
                                             response.detections(), settings(), members));
    return members;
  }

  absl::StatusOr<std::string> Explain(const InputImage& input, const v1::ExplainRequest&,
                                      const v1::ExplainResponse& response) override {
    std::string members = DetectionsJson(response.detections());
    GS_RETURN_IF_ERROR(
        WriteDetectionExplainFiles(paths().Prefix(input.file), input.image, response, settings(),
                                   members));
    return members;
  }
};

}  // namespace

extern const TaskFactory kDetectionOutput = &NewOutput<DetectionOutput>;

}  // namespace gatescope::client
