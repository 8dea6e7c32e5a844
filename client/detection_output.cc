#include "client/detection_output.h"

#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "client/detection_view.h"
#include "client/file_io.h"
#include "client/json_writer.h"
#include "client/npy_writer.h"
#include "client/panel.h"
#include "server/common/status_macros.h"

namespace gatescope::client {
namespace {

using ::gatescope::v1::Detection;
using ::gatescope::v1::Tensor;
using Detections = google::protobuf::RepeatedPtrField<Detection>;

std::vector<int64_t> ShapeOf(const Tensor& t) { return {t.shape().begin(), t.shape().end()}; }

// True if `t` is FLOAT32 of rank `rank` with positive dims holding exactly its bytes.
bool WellFormed(const Tensor& t, int rank) {
  if (t.dtype() != Tensor::FLOAT32 || t.shape_size() != rank) return false;
  const int64_t n = NpyElements(ShapeOf(t));
  return n > 0 && n < (int64_t{1} << 28) && static_cast<uint64_t>(n) * 4 == t.data().size();
}

const float* Floats(const Tensor& t) { return reinterpret_cast<const float*>(t.data().data()); }

std::vector<DrawnBox> BoxesOf(const Detections& detections) {
  std::vector<DrawnBox> boxes;
  for (const Detection& d : detections) {
    char score[16];
    std::snprintf(score, sizeof(score), "%.2f", d.score());
    boxes.push_back({d.x1(), d.y1(), d.x2(), d.y2(), d.label_index(), d.label() + " " + score});
  }
  return boxes;
}

absl::Status Write(const std::string& path, const Tensor& t, std::vector<std::string>& npy) {
  if (!WriteNpy(path, ShapeOf(t), t.data())) return absl::InternalError("cannot write " + path);
  npy.push_back(path);
  return absl::OkStatus();
}

absl::Status WritePicture(const std::string& path, const cv::Mat& picture, const char* key,
                          std::string& json) {
  if (!WritePng(path, picture)) return absl::InternalError("cannot render or write " + path);
  json += ",\"" + std::string(key) + "\":" + JsonString(path);
  return absl::OkStatus();
}

// The encoder gate panel: the input, then each (layer, level) map averaged over heads and
// sampled levels. Writes the .npy files too.
absl::Status WriteEncoderGates(const std::string& prefix, const cv::Mat& image,
                               const ::gatescope::v1::ExplainResponse& resp,
                               const OutputSettings& settings, std::string& json,
                               std::vector<std::string>& npy) {
  // Each map is [M, L, h, w] and the maps come level by level: L per encoder layer.
  const Tensor& first = resp.encoder_plug_gates(0);
  const int levels = first.shape_size() == 4 ? static_cast<int>(first.shape(1)) : 0;
  if (levels <= 0 || resp.encoder_plug_gates_size() % levels != 0) {
    return absl::DataLossError("encoder_plug_gates do not come in whole layers of levels");
  }
  MapPanel panel(image, TileSize(image.size(), 112, 256), settings.scale);
  panel.AddInput();
  for (int i = 0; i < resp.encoder_plug_gates_size(); ++i) {
    const Tensor& g = resp.encoder_plug_gates(i);
    if (!WellFormed(g, 4))
      return absl::DataLossError("malformed encoder_plug_gates in the response");
    const std::string name = "e" + std::to_string(i / levels) + ".k" + std::to_string(i % levels);
    GS_RETURN_IF_ERROR(Write(prefix + "encoder_plug_gate." + name + ".npy", g, npy));
    const cv::Mat mean = HeadMean(Floats(g), static_cast<int>(g.shape(0) * g.shape(1)),
                                  static_cast<int>(g.shape(2)), static_cast<int>(g.shape(3)));
    panel.AddMap(mean,
                 "gate " + name + " (" + std::to_string(g.shape(2)) + "x" +
                     std::to_string(g.shape(3)) + ")",
                 "gate");
  }
  const std::string title = settings.model + ": " + DetectionSummary(resp.detections()) +
                            "  (scale: " + ScaleModeName(settings.scale) + ")";
  return WritePicture(prefix + "encoder_plug_gates.png",
                      Rendered([&] { return panel.Render(title); }), "encoder_plug_gates", json);
}

// Writes detection `i`'s maps as .npy files; returns the last decoder layer's sampling
// points (every head, level and point) with their weights, to draw.
absl::StatusOr<DrawnPoints> WriteDetectionMaps(const std::string& prefix, int i,
                                               const ::gatescope::v1::DetectionMaps& maps,
                                               const Detection& detection,
                                               std::vector<std::string>& npy) {
  const Tensor& loc = maps.sampling_points();
  const Tensor& w = maps.attention_weights();
  if (!WellFormed(loc, 5) || !WellFormed(w, 4) || loc.shape(4) != 2 ||
      NpyElements(ShapeOf(loc)) != 2 * NpyElements(ShapeOf(w))) {
    return absl::DataLossError("malformed detection maps in the response");
  }
  const std::string stem = prefix + "detection" + std::to_string(i);
  GS_RETURN_IF_ERROR(Write(stem + ".sampling_points.npy", loc, npy));
  GS_RETURN_IF_ERROR(Write(stem + ".attention_weights.npy", w, npy));
  if (maps.has_plug_gate()) {
    if (!WellFormed(maps.plug_gate(), 3)) {
      return absl::DataLossError("malformed plug_gate in the response");
    }
    GS_RETURN_IF_ERROR(Write(stem + ".plug_gate.npy", maps.plug_gate(), npy));
  }
  const int64_t per_layer = NpyElements(ShapeOf(w)) / w.shape(0);
  const float* xy = Floats(loc) + (w.shape(0) - 1) * per_layer * 2;
  const float* weights = Floats(w) + (w.shape(0) - 1) * per_layer;
  DrawnPoints points;
  points.label = detection.label_index();
  for (int64_t j = 0; j < per_layer; ++j) {
    points.points.emplace_back(xy[2 * j], xy[2 * j + 1]);
    points.weights.push_back(weights[j]);
  }
  return points;
}

size_t CountPoints(const std::vector<DrawnPoints>& points) {
  size_t n = 0;
  for (const DrawnPoints& p : points) n += p.points.size();
  return n;
}

}  // namespace

std::string DetectionsJson(const Detections& detections) {
  std::string out = ",\"detections\":[";
  for (int i = 0; i < detections.size(); ++i) {
    const Detection& d = detections.Get(i);
    out += (i ? "," : "") + std::string("{\"label\":") + JsonString(d.label()) +
           ",\"label_index\":" + std::to_string(d.label_index()) +
           ",\"score\":" + JsonNumber(d.score()) + ",\"box\":[" + JsonNumber(d.x1()) + "," +
           JsonNumber(d.y1()) + "," + JsonNumber(d.x2()) + "," + JsonNumber(d.y2()) +
           "],\"query\":" + std::to_string(d.query()) + "}";
  }
  return out + "]";
}

absl::Status WriteDetectionPicture(const std::string& prefix, const cv::Mat& image,
                                   const Detections& detections, const OutputSettings& settings,
                                   std::string& json) {
  if (image.empty()) return absl::InvalidArgumentError("boxes.png needs an encoded image input");
  DetectionDrawing drawing;
  drawing.boxes = BoxesOf(detections);
  drawing.title = settings.model + ": " + DetectionSummary(detections);
  return WritePicture(prefix + "boxes.png", Rendered([&] { return DetectionPicture(image, drawing); }),
                      "boxes", json);
}

std::string DetectionSummary(const Detections& detections) {
  if (detections.empty()) return "no detections";
  char score[16];
  std::snprintf(score, sizeof(score), "%.2f", detections.Get(0).score());
  return std::to_string(detections.size()) + " detection" + (detections.size() > 1 ? "s" : "") +
         ", best " + detections.Get(0).label() + " " + score;
}

absl::Status WriteDetectionExplainFiles(const std::string& prefix, const cv::Mat& image,
                                        const ::gatescope::v1::ExplainResponse& resp,
                                        const OutputSettings& settings, std::string& json) {
  if (resp.detection_maps_size() != resp.detections_size()) {
    return absl::DataLossError("the response has maps for " +
                               std::to_string(resp.detection_maps_size()) + " of " +
                               std::to_string(resp.detections_size()) + " detections");
  }
  std::vector<std::string> npy;
  std::vector<DrawnPoints> points;
  for (int i = 0; i < resp.detection_maps_size(); ++i) {
    GS_ASSIGN_OR_RETURN(DrawnPoints p, WriteDetectionMaps(prefix, i, resp.detection_maps(i),
                                                          resp.detections(i), npy));
    points.push_back(std::move(p));
  }
  if (!image.empty()) {
    DetectionDrawing drawing;
    drawing.boxes = BoxesOf(resp.detections());
    drawing.points = points;
    drawing.title = settings.model + ": " + DetectionSummary(resp.detections()) +
                    ", last decoder layer's sampling points";
    GS_RETURN_IF_ERROR(WritePicture(prefix + "sampling_points.png",
                                    Rendered([&] { return DetectionPicture(image, drawing); }),
                                    "sampling_points", json));
    json += ",\"points_outside\":" + std::to_string(PointsOutside(points, image.size())) +
            ",\"points\":" + std::to_string(CountPoints(points));
    if (resp.encoder_plug_gates_size() > 0) {
      GS_RETURN_IF_ERROR(WriteEncoderGates(prefix, image, resp, settings, json, npy));
    }
  }
  json += ",\"npy\":" + JsonStringArray(npy);
  return absl::OkStatus();
}

}  // namespace gatescope::client
