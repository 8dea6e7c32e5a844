// gatescope-client explain --compare: see commands.h. The compared models must share a
// task; each task has its paper-style picture:
//   classification  the input, then each model's rollout (DGSA paper Figs. 2-3);
//   segmentation    a row per model (mask, then each stage's query attention), then a row
//                   with the ground truth (or the input) and each stage's difference
//                   first model - second model (GDLA paper Figs. 6-8);
//   detection       each model's boxes and last-layer sampling points over a density of
//                   the points, ground-truth boxes dashed (PLuG paper Fig. 9);
//   text            an HTML page (not a PNG): the text once per model, shaded by that
//                   model's rollout over its own pieces (DGT paper Fig. 3; text_output.h).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include <opencv2/imgproc.hpp>

#include "client/classification_output.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/detection_output.h"
#include "client/detection_view.h"
#include "client/file_io.h"
#include "client/ground_truth.h"
#include "client/input_image.h"
#include "client/json_writer.h"
#include "client/map_tensors.h"
#include "client/output_paths.h"
#include "client/panel.h"
#include "client/requests.h"
#include "client/segmentation_output.h"
#include "client/segmentation_view.h"
#include "client/text_output.h"
#include "server/common/status_macros.h"

namespace gatescope::client {
namespace {

// A compared model as its metadata describes it.
struct Compared {
  std::string model, version;
  v1::ModelConfig config;
};

// One model's answer for one input: its explanation, or why there is none.
struct Answer {
  const Compared* model = nullptr;
  absl::StatusOr<v1::ExplainResponse> response = absl::UnknownError("not asked");
};

// Ground truth for the one input of a --gt comparison.
struct Truth {
  cv::Mat labels;               // segmentation
  std::vector<DrawnBox> boxes;  // detection
  bool given = false;
};

std::string Caption(const std::string& model, const std::string& what) {
  return model + ": " + what;
}

bool HasMap(const v1::ModelConfig& config, const std::string& kind) {
  return std::find(config.maps().begin(), config.maps().end(), kind) != config.maps().end();
}

// The query pixel of a segmentation comparison: --query, else the centre of the input.
v1::QueryPixel QueryFor(const ExplainOptions& options, const cv::Mat& image) {
  v1::QueryPixel q;
  q.set_y(options.query ? options.query->y : image.rows / 2);
  q.set_x(options.query ? options.query->x : image.cols / 2);
  return q;
}

v1::ExplainRequest RequestFor(const ExplainOptions& options, const Compared& m,
                              const InputImage& input) {
  v1::ExplainRequest request = RolloutRequestFor(options, m.model, input.bytes);
  request.set_model_version(m.version);
  if (input.text) SetText(input.bytes, request);
  const std::string& task = m.config.task();
  if (task == "image_classification" || task == "text_classification") {
    request.set_rollout(true);
  } else {
    request.clear_rollout_options();  // segmentation and detection refuse rollout settings
  }
  if (task == "image_segmentation") {
    *request.mutable_query_pixel() = QueryFor(options, input.image);
    request.set_gates(HasMap(m.config, "gate"));
  }
  if (task == "object_detection") {
    request.set_plug_gates(HasMap(m.config, "plug_gate"));
    if (options.detection.score_threshold) {
      request.set_score_threshold(*options.detection.score_threshold);
    }
    if (options.detection.max_detections) {
      request.set_max_detections(options.detection.max_detections);
    }
  }
  return request;
}

// Reports a failed answer (server or malformed) once; true if `answer` can be drawn.
template <typename Check>
bool Usable(const InputImage& input, Answer& answer, Report& report, Check check) {
  if (!answer.response.ok()) {
    report.ServerFailure(input.file, answer.response.status(), answer.model->model);
    return false;
  }
  if (absl::Status st = check(*answer.response); !st.ok()) {
    report.ClientFailure(input.file, st, answer.model->model);
    answer.response = st;
    return false;
  }
  return true;
}

absl::Status CheckRollout(const v1::ExplainResponse& r) {
  if (!r.has_rollout()) return absl::DataLossError("no rollout in the response");
  return CheckMap(r.rollout(), 2, "rollout");
}

absl::Status CheckSegmentation(const v1::ExplainResponse& r) {
  GS_RETURN_IF_ERROR(MaskFromProto(r.segmentation().mask()).status());
  for (const v1::Tensor& t : r.query_attention()) GS_RETURN_IF_ERROR(CheckMap(t, 2, "query attention"));
  return absl::OkStatus();
}

absl::Status CheckDetection(const v1::ExplainResponse& r) {
  if (r.detection_maps_size() != r.detections_size()) {
    return absl::DataLossError("the response has maps for some detections only");
  }
  for (const v1::DetectionMaps& m : r.detection_maps()) {
    const v1::Tensor& loc = m.sampling_points();
    const v1::Tensor& w = m.attention_weights();
    GS_RETURN_IF_ERROR(CheckMap(loc, 5, "sampling points"));
    GS_RETURN_IF_ERROR(CheckMap(w, 4, "attention weights"));
    bool match = loc.shape(4) == 2 && w.data().size() > 0;  // no empty layer to divide by
    for (int d = 0; d < 4 && match; ++d) match = loc.shape(d) == w.shape(d) && w.shape(d) > 0;
    if (!match) return absl::DataLossError("sampling points and weights do not match");
  }
  return absl::OkStatus();
}

std::string ModelJson(const Answer& a, const std::string& members) {
  return "{\"model\":" + JsonString(a.model->model) + ",\"version\":" +
         JsonString(a.model->version) + members + "}";
}

// --- classification -----------------------------------------------------------------

cv::Mat ClassificationPicture(const ExplainOptions& options, const InputImage& input,
                              std::vector<Answer>& answers, std::string& models_json,
                              Report& report) {
  MapPanel panel(input.image, TileSize(input.image.size(), 144, 224), options.scale);
  panel.AddInput();
  for (Answer& a : answers) {
    if (!Usable(input, a, report, CheckRollout)) {
      panel.AddPicture({}, Caption(a.model->model, "error"));
      continue;
    }
    const auto& classes = a.response->classes();
    panel.AddMap(GridMat(a.response->rollout()), Caption(a.model->model, TopClassText(classes)),
                 "rollout");
    models_json += std::string(models_json.empty() ? "" : ",") +
                   ModelJson(a, classes.empty() ? "" : ",\"label\":" +
                                                           JsonString(classes.Get(0).label()) +
                                                           ",\"score\":" +
                                                           JsonNumber(classes.Get(0).probability()));
  }
  return panel.Render(std::string("rollout  (scale: ") + ScaleModeName(options.scale) + ")");
}

// --- segmentation ---------------------------------------------------------------------

cv::Mat StageMap(const v1::Tensor& t) { return GridMat(t); }

cv::Mat SegmentationPicture(const ExplainOptions& options, const InputImage& input,
                            const Truth& truth, std::vector<Answer>& answers,
                            std::string& models_json, Report& report) {
  const cv::Mat& image = input.image;
  const cv::Size tile = TileSize(image.size(), 112, 256);
  const v1::QueryPixel q = QueryFor(options, image);
  std::vector<Answer*> drawn;
  for (Answer& a : answers) {
    if (Usable(input, a, report, CheckSegmentation)) drawn.push_back(&a);
  }
  if (drawn.empty()) return {};
  int stages = 0;
  for (const Answer* a : drawn) stages = std::max(stages, a->response->query_attention_size());
  // One scale per stage across the models (each stage's attention sums to one over its
  // own grid, so stages differ in magnitude; models at one stage do not).
  std::vector<MapRange> stage_ranges(stages);
  for (int s = 0; s < stages; ++s) {
    std::vector<MapRange> ranges;
    for (const Answer* a : drawn) {
      if (s < a->response->query_attention_size()) {
        ranges.push_back(RangeOf(StageMap(a->response->query_attention(s))));
      }
    }
    stage_ranges[s] = Union(ranges);
  }
  std::vector<cv::Mat> rows;
  std::vector<cv::Mat> first_maps;
  for (size_t k = 0; k < drawn.size(); ++k) {
    const Answer& a = *drawn[k];
    const std::vector<std::string> labels(a.model->config.labels().begin(),
                                          a.model->config.labels().end());
    const cv::Mat mask = *MaskFromProto(a.response->segmentation().mask());
    std::string mask_caption = "mask";
    std::string members;
    if (truth.given && mask.size() != truth.labels.size()) {
      report.ClientFailure(input.file,
                           absl::DataLossError("the mask is not the size of --gt: no Dice"),
                           a.model->model);
      mask_caption = "mask (no Dice: size differs from --gt)";
    } else if (truth.given) {
      const std::map<int, double> dice = DiceByClass(mask, truth.labels);
      char text[64];
      std::snprintf(text, sizeof(text), "mask, Dice %.3f", MeanDice(dice));
      mask_caption = text;
      members += ",\"dice\":" + JsonNumber(MeanDice(dice)) + ",\"dice_by_class\":{";
      bool first = true;
      for (const auto& [c, d] : dice) {
        const std::string name = c < static_cast<int>(labels.size()) ? labels[c] : std::to_string(c);
        members += (first ? "" : ",") + JsonString(name) + ":" + JsonNumber(d);
        first = false;
      }
      members += "}";
    }
    MapPanel row(image, tile, options.scale);
    row.AddPicture(MaskOverlay(image, mask), mask_caption);
    for (int s = 0; s < a.response->query_attention_size(); ++s) {
      cv::Mat map = StageMap(a.response->query_attention(s));
      if (k == 0) first_maps.push_back(map);
      const std::string group = "s" + std::to_string(s);
      row.IncludeInScale(group, stage_ranges[s]);
      row.AddMap(map, "query attention " + group + " (" + std::to_string(map.rows) + "x" +
                          std::to_string(map.cols) + ")",
                 group);
    }
    row.Mark(q.y(), q.x());
    rows.push_back(row.Render(a.model->model + ": " +
                              SegmentationSummary(a.response->segmentation(), labels) +
                              "  (scale: " + ScaleModeName(options.scale) + " per stage)"));
    models_json += std::string(models_json.empty() ? "" : ",") + ModelJson(a, members);
  }
  if (drawn.size() >= 2) {
    MapPanel diff(image, tile, ScaleMode::kTile);
    if (truth.given) {
      diff.AddPicture(MaskOverlay(image, truth.labels), "ground truth");
    } else {
      diff.AddInput();
    }
    const Answer& second = *drawn[1];
    for (int s = 0; s < static_cast<int>(first_maps.size()); ++s) {
      if (s >= second.response->query_attention_size()) break;
      cv::Mat other = StageMap(second.response->query_attention(s));
      if (other.size() != first_maps[s].size()) {
        cv::resize(other, other, first_maps[s].size(), 0, 0, cv::INTER_LINEAR);
      }
      diff.AddMap(first_maps[s] - other, "difference s" + std::to_string(s));
    }
    diff.Mark(q.y(), q.x());
    rows.push_back(diff.Render("difference " + drawn[0]->model->model + " - " +
                               second.model->model + " (blue: " + second.model->model +
                               " attends more, red: " + drawn[0]->model->model + ")"));
  }
  const int width = std::max_element(rows.begin(), rows.end(), [](const cv::Mat& a, const cv::Mat& b) {
                      return a.cols < b.cols;
                    })->cols;
  for (cv::Mat& r : rows) {
    if (r.cols < width) {
      cv::copyMakeBorder(r, r, 0, 0, 0, width - r.cols, cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
    }
  }
  cv::Mat picture;
  cv::vconcat(rows, picture);
  return picture;
}

// --- detection ------------------------------------------------------------------------

// The last decoder layer's sampling points and weights of every detection of `r`.
std::vector<DrawnPoints> LastLayerPoints(const v1::ExplainResponse& r) {
  std::vector<DrawnPoints> all;
  for (int i = 0; i < r.detection_maps_size(); ++i) {
    const v1::Tensor& loc = r.detection_maps(i).sampling_points();
    const v1::Tensor& w = r.detection_maps(i).attention_weights();
    const int64_t per_layer = static_cast<int64_t>(w.data().size() / 4) / w.shape(0);
    const float* xy = reinterpret_cast<const float*>(loc.data().data()) +
                      (w.shape(0) - 1) * per_layer * 2;
    const float* weights = reinterpret_cast<const float*>(w.data().data()) +
                           (w.shape(0) - 1) * per_layer;
    DrawnPoints p;
    p.label = r.detections(i).label_index();
    for (int64_t j = 0; j < per_layer; ++j) {
      p.points.emplace_back(xy[2 * j], xy[2 * j + 1]);
      p.weights.push_back(weights[j]);
    }
    all.push_back(std::move(p));
  }
  return all;
}

cv::Mat DetectionComparePicture(const InputImage& input, const Truth& truth, std::vector<Answer>& answers,
                                std::string& models_json, Report& report) {
  std::vector<cv::Mat> columns;
  for (Answer& a : answers) {
    if (!Usable(input, a, report, CheckDetection)) continue;
    DetectionDrawing d;
    for (const v1::Detection& det : a.response->detections()) {
      char score[16];
      std::snprintf(score, sizeof(score), "%.2f", det.score());
      d.boxes.push_back({det.x1(), det.y1(), det.x2(), det.y2(), det.label_index(),
                         det.label() + " " + score});
    }
    d.points = LastLayerPoints(*a.response);
    d.truth = truth.boxes;
    d.density = true;
    std::string members = ",\"detections\":" + std::to_string(d.boxes.size());
    d.title = a.model->model + ": " + DetectionSummary(a.response->detections());
    if (truth.given) {
      const int matched = MatchedBoxes(d.boxes, truth.boxes);
      d.title += ", found " + std::to_string(matched) + " of " +
                 std::to_string(truth.boxes.size()) + " true boxes (IoU>=0.5)";
      members += ",\"true_boxes\":" + std::to_string(truth.boxes.size()) +
                 ",\"found\":" + std::to_string(matched);
    }
    size_t points = 0;
    for (const DrawnPoints& p : d.points) points += p.points.size();
    members += ",\"points\":" + std::to_string(points) + ",\"points_outside\":" +
               std::to_string(PointsOutside(d.points, input.image.size()));
    columns.push_back(DetectionPicture(input.image, d));
    models_json += std::string(models_json.empty() ? "" : ",") + ModelJson(a, members);
  }
  if (columns.empty()) return {};
  int height = 0;
  for (const cv::Mat& c : columns) height = std::max(height, c.rows);
  for (cv::Mat& c : columns) {
    cv::copyMakeBorder(c, c, 0, height - c.rows, 0, 6, cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
  }
  cv::Mat picture;
  cv::hconcat(columns, picture);
  return picture;
}

// --- text ---------------------------------------------------------------------------

// The page of a text comparison; "" when no model's answer can be drawn.
std::string TextComparison(const ExplainOptions& options, const InputImage& input,
                           std::vector<Answer>& answers, std::string& models_json,
                           Report& report) {
  std::vector<TextCompareRow> rows;
  const auto check = [&input](const v1::ExplainResponse& r) {
    return CheckTextExplain(r, input.bytes, /*need_rollout=*/true);
  };
  for (Answer& a : answers) {
    TextCompareRow row{{a.model->model, a.model->version}, nullptr, ""};
    if (!Usable(input, a, report, check)) {
      row.error = absl::StatusCodeToString(a.response.status().code()) + ": " +
                  std::string(a.response.status().message());
      rows.push_back(std::move(row));
      continue;
    }
    row.response = &*a.response;
    rows.push_back(std::move(row));
    const auto& classes = a.response->classes();
    const v1::TextInput& text = a.response->text();
    std::string members;
    if (!classes.empty()) {
      members = ",\"label\":" + JsonString(classes.Get(0).label()) +
                ",\"score\":" + JsonNumber(classes.Get(0).probability());
    }
    members += ",\"tokens\":" + std::to_string(text.pieces_read()) +
               ",\"truncated\":" + (text.truncated() ? "true" : "false") +
               ",\"chars_read\":" + std::to_string(text.chars_read());
    models_json += std::string(models_json.empty() ? "" : ",") + ModelJson(a, members);
  }
  if (models_json.empty()) return "";
  return TextComparePage(input.file, input.bytes, rows, options.scale);
}

// --- the command ----------------------------------------------------------------------

// The models and ground truth of a comparison, fetched when the first readable input
// needs them (so that an unreadable input is reported as such even with no server).
class Comparison {
 public:
  Comparison(const InferenceClient& client, const ExplainOptions& options)
      : client_(client), options_(options) {}

  // The models (metadata fetched once) and the ground truth; the same error every time
  // if either cannot be had.
  absl::Status Prepare(Report& report);
  const std::vector<Compared>& models() const { return models_; }
  const Truth& truth() const { return truth_; }

 private:
  const InferenceClient& client_;
  const ExplainOptions& options_;
  std::optional<absl::Status> prepared_;
  std::vector<Compared> models_;
  Truth truth_;
};

void CompareOne(const InferenceClient& client, const ExplainOptions& options,
                Comparison& comparison, size_t i, OutputPaths& paths, Report& report) {
  const std::string& file = options.files[i];
  const absl::StatusOr<InputImage> input =
      ReadCommandInput(options.files, options.texts, i, /*decode=*/true);
  if (!input.ok()) return report.ClientFailure(file, input.status());
  if (absl::Status st = comparison.Prepare(report); !st.ok()) {
    return report.ServerFailure(file, st);
  }
  const std::vector<Compared>& models = comparison.models();
  const Truth& truth = comparison.truth();
  if (truth.given && !truth.labels.empty() && truth.labels.size() != input->image.size()) {
    return report.ClientFailure(
        file, absl::InvalidArgumentError("--gt is not the size of the input image"));
  }
  std::vector<Answer> answers;
  for (const Compared& m : models) {
    answers.push_back({&m, CallExplain(client, RequestFor(options, m, *input),
                                       options.target.timeout_ms)});
  }
  const std::string& task = models.front().config.task();
  std::string models_json;
  if (task == "text_classification") {
    const std::string page = TextComparison(options, *input, answers, models_json, report);
    if (models_json.empty()) return;  // every model failed, each with its line
    const std::string path = paths.Stem(file) + ".compare.html";
    if (!WriteBytes(path, page)) {
      return report.ClientFailure(file, absl::InternalError("cannot write " + path));
    }
    return report.Success(file,
                          ",\"compare\":" + JsonString(path) + ",\"models\":[" + models_json + "]");
  }
  const cv::Mat picture = Rendered([&] {
    if (task == "image_segmentation") {
      return SegmentationPicture(options, *input, truth, answers, models_json, report);
    }
    if (task == "object_detection") {
      return DetectionComparePicture(*input, truth, answers, models_json, report);
    }
    return ClassificationPicture(options, *input, answers, models_json, report);
  });
  if (models_json.empty()) return;  // every model failed, each with its line
  const std::string path = paths.Stem(file) + ".compare.png";
  if (!WritePng(path, picture)) {
    return report.ClientFailure(file, absl::InternalError("cannot render or write " + path));
  }
  report.Success(file, ",\"compare\":" + JsonString(path) + ",\"models\":[" + models_json + "]");
}

// The compared models' metadata; an error if one cannot be had or their tasks differ.
absl::StatusOr<std::vector<Compared>> DescribeModels(const InferenceClient& client,
                                                     const ExplainOptions& options) {
  std::vector<Compared> models;
  for (const std::string& name : options.compare) {
    ModelTarget target = options.target;
    target.model = name;
    absl::StatusOr<v1::ModelMetadataResponse> metadata = FetchModelMetadata(client, target);
    if (!metadata.ok()) {
      return absl::Status(metadata.status().code(),
                          "model " + name + ": " + std::string(metadata.status().message()));
    }
    models.push_back({metadata->name(), metadata->version(), metadata->config()});
    if (models.back().config.task() != models.front().config.task()) {
      return absl::InvalidArgumentError(
          "--compare needs models of one task: " + models.front().model + " is " +
          models.front().config.task() + ", " + name + " is " + models.back().config.task());
    }
  }
  return models;
}

absl::StatusOr<Truth> ReadTruth(const ExplainOptions& options, const std::string& task) {
  Truth truth;
  if (options.gt.empty()) return truth;
  if (options.files.size() != 1) {
    return absl::InvalidArgumentError("--gt describes one input: give exactly one file");
  }
  truth.given = true;
  if (task == "image_segmentation") {
    GS_ASSIGN_OR_RETURN(truth.labels, ReadLabelImage(options.gt));
  } else if (task == "object_detection") {
    GS_ASSIGN_OR_RETURN(truth.boxes, ReadBoxesCsv(options.gt));
  } else {
    return absl::InvalidArgumentError("--gt is for segmentation and detection models");
  }
  return truth;
}

absl::Status Comparison::Prepare(Report& report) {
  if (prepared_) return *prepared_;
  prepared_ = [&]() -> absl::Status {
    GS_ASSIGN_OR_RETURN(models_, DescribeModels(client_, options_));
    GS_ASSIGN_OR_RETURN(truth_, ReadTruth(options_, models_.front().config.task()));
    std::string names, versions;
    for (const Compared& m : models_) {
      names += (names.empty() ? "" : ",") + m.model;
      versions += (versions.empty() ? "" : ",") + m.version;
    }
    report.SetModel(names, versions, models_.front().config.task());
    return absl::OkStatus();
  }();
  return *prepared_;
}

}  // namespace

absl::Status RunCompare(const Connection& server, const ExplainOptions& options,
                        Report& report) {
  const InferenceClient client(server);
  Comparison comparison(client, options);
  OutputPaths paths(options.out_dir, options.files.size() > 1);
  for (size_t i = 0; i < options.files.size(); ++i) {
    CompareOne(client, options, comparison, i, paths, report);
  }
  return absl::OkStatus();
}

}  // namespace gatescope::client
