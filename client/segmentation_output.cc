#include "client/segmentation_output.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "client/file_io.h"
#include "client/json_writer.h"
#include "client/npy_writer.h"
#include "client/panel.h"
#include "client/segmentation_view.h"
#include "server/common/status_macros.h"

namespace gatescope::client {
namespace {

using ::gatescope::v1::Tensor;

// True if `t` is a [rows, cols] tensor of `dtype` (sides in 1..32768) holding exactly
// rows * cols * `element_size` bytes.
bool IsPlane(const Tensor& t, Tensor::DType dtype, uint64_t element_size) {
  return t.dtype() == dtype && t.shape_size() == 2 && t.shape(0) > 0 && t.shape(1) > 0 &&
         t.shape(0) <= (1 << 15) && t.shape(1) <= (1 << 15) &&
         static_cast<uint64_t>(t.shape(0) * t.shape(1)) * element_size == t.data().size();
}

// A FLOAT32 [rows, cols] tensor as a CV_32FC1 Mat; an error if malformed.
absl::StatusOr<cv::Mat> MapFromProto(const Tensor& t, const std::string& name) {
  if (!IsPlane(t, Tensor::FLOAT32, 4)) {
    return absl::DataLossError("malformed " + name + " map in the response");
  }
  cv::Mat map(static_cast<int>(t.shape(0)), static_cast<int>(t.shape(1)), CV_32FC1);
  std::memcpy(map.ptr<float>(), t.data().data(), t.data().size());
  return map;
}

std::vector<int64_t> ShapeOf(const Tensor& t) { return {t.shape().begin(), t.shape().end()}; }

std::string Member(const std::string& key, const std::string& path) {
  return "," + JsonString(key) + ":" + JsonString(path);
}

// The panel of one map kind: the input, then each stage's map over it, the query marked.
// Writes `prefix` + png_name and one .npy per stage.
absl::Status WriteStagePanel(const std::string& prefix, const std::string& kind,
                             const std::string& png_name, const std::string& title,
                             ScaleMode scale, const cv::Mat& image,
                             const google::protobuf::RepeatedPtrField<Tensor>& maps,
                             const ::gatescope::v1::QueryPixel* query, std::string& json,
                             std::vector<std::string>& npy) {
  MapPanel panel(image, TileSize(image.size(), 112, 1024), scale);
  panel.AddInput();
  for (int s = 0; s < maps.size(); ++s) {
    GS_ASSIGN_OR_RETURN(cv::Mat map, MapFromProto(maps.Get(s), kind));
    const std::string caption = kind + " s" + std::to_string(s) + " (" +
                                std::to_string(map.rows) + "x" + std::to_string(map.cols) + ")";
    panel.AddMap(std::move(map), caption, kind);
    const std::string path = prefix + kind + ".s" + std::to_string(s) + ".npy";
    if (!WriteNpy(path, ShapeOf(maps.Get(s)), maps.Get(s).data())) {
      return absl::InternalError("cannot write " + path);
    }
    npy.push_back(path);
  }
  if (query != nullptr) panel.Mark(query->y(), query->x());
  const std::string path = prefix + png_name;
  if (!WritePng(path, Rendered([&] { return panel.Render(title); }))) {
    return absl::InternalError("cannot render or write " + path);
  }
  json += Member(png_name.substr(0, png_name.size() - 4), path);
  return absl::OkStatus();
}

absl::StatusOr<cv::Mat> WriteMaskPicture(const std::string& prefix, const cv::Mat& image,
                                         const ::gatescope::v1::Segmentation& seg,
                                         const std::vector<std::string>& labels,
                                         std::string& json) {
  GS_ASSIGN_OR_RETURN(cv::Mat mask, MaskFromProto(seg.mask()));
  std::vector<std::string> names;
  for (int i = 0; i < seg.class_pixels_size(); ++i) {
    names.push_back(i < static_cast<int>(labels.size()) ? labels[i] : std::to_string(i));
  }
  const std::vector<int64_t> pixels(seg.class_pixels().begin(), seg.class_pixels().end());
  const std::string path = prefix + "mask.png";
  if (!WritePng(path, SegmentationPicture(image, mask, names, pixels))) {
    return absl::InternalError("cannot render or write " + path);
  }
  json += Member("mask", path);
  return mask;
}

}  // namespace

absl::StatusOr<cv::Mat> MaskFromProto(const Tensor& t) {
  if (!IsPlane(t, Tensor::UINT8, 1)) return absl::DataLossError("malformed mask in the response");
  cv::Mat mask(static_cast<int>(t.shape(0)), static_cast<int>(t.shape(1)), CV_8UC1);
  std::memcpy(mask.data, t.data().data(), t.data().size());
  return mask;
}

std::string SegmentationJson(const ::gatescope::v1::Segmentation& seg,
                             const std::vector<std::string>& labels) {
  const auto& mask = seg.mask();
  std::string json;
  if (mask.shape_size() == 2) {
    json += ",\"height\":" + std::to_string(mask.shape(0)) +
            ",\"width\":" + std::to_string(mask.shape(1));
  }
  json += ",\"class_pixels\":{";
  for (int i = 0; i < seg.class_pixels_size(); ++i) {
    const std::string name = i < static_cast<int>(labels.size()) ? labels[i] : std::to_string(i);
    json += (i ? "," : "") + JsonString(name) + ":" + std::to_string(seg.class_pixels(i));
  }
  return json + "}";
}

absl::Status WritePredictFiles(const std::string& prefix, const cv::Mat& image,
                               const ::gatescope::v1::Segmentation& seg,
                               const std::vector<std::string>& labels, std::string& json) {
  GS_ASSIGN_OR_RETURN(const cv::Mat mask, WriteMaskPicture(prefix, image, seg, labels, json));
  const std::string raw = prefix + "mask_raw.png";
  const bool raw_ok =
      seg.mask_png().empty() ? WritePng(raw, mask) : WriteBytes(raw, seg.mask_png());
  if (!raw_ok) return absl::InternalError("cannot write " + raw);
  json += Member("mask_raw", raw);
  if (seg.has_probabilities()) {
    const std::string path = prefix + "probabilities.npy";
    if (seg.probabilities().dtype() != Tensor::FLOAT32 ||
        !WriteNpy(path, ShapeOf(seg.probabilities()), seg.probabilities().data())) {
      return absl::InternalError("malformed probabilities or cannot write " + path);
    }
    json += Member("probabilities", path);
  }
  return absl::OkStatus();
}

std::string SegmentationSummary(const ::gatescope::v1::Segmentation& seg,
                                const std::vector<std::string>& labels) {
  int64_t total = 0;
  for (int64_t n : seg.class_pixels()) total += n;
  std::vector<std::pair<int64_t, int>> by_size;
  for (int i = 1; i < seg.class_pixels_size(); ++i) {  // class 0 is the background
    if (seg.class_pixels(i) > 0) by_size.emplace_back(seg.class_pixels(i), i);
  }
  std::sort(by_size.rbegin(), by_size.rend());
  std::string text;
  for (size_t k = 0; k < by_size.size() && k < 3; ++k) {
    const int i = by_size[k].second;
    char percent[32];
    std::snprintf(percent, sizeof(percent), " %.1f%%", total ? 100.0 * by_size[k].first / total : 0);
    text += (k ? ", " : "") + (i < static_cast<int>(labels.size()) ? labels[i] : std::to_string(i)) +
            percent;
  }
  return text.empty() ? "background only" : text;
}

absl::Status WriteExplainFiles(const std::string& prefix, const cv::Mat& image,
                               const ::gatescope::v1::ExplainResponse& resp,
                               const OutputSettings& settings, std::string& json) {
  GS_RETURN_IF_ERROR(
      WriteMaskPicture(prefix, image, resp.segmentation(), settings.labels, json).status());
  std::vector<std::string> npy;
  const std::string title = settings.model + ": " +
                            SegmentationSummary(resp.segmentation(), settings.labels) +
                            "  (scale: " + ScaleModeName(settings.scale) + ")";
  if (resp.gates_size() > 0) {
    GS_RETURN_IF_ERROR(WriteStagePanel(prefix, "gate", "gates.png", title, settings.scale, image,
                                       resp.gates(), nullptr, json, npy));
  }
  if (resp.query_attention_size() > 0) {
    GS_RETURN_IF_ERROR(WriteStagePanel(prefix, "query_attention", "query_attention.png", title,
                                       settings.scale, image, resp.query_attention(),
                                       settings.query ? &*settings.query : nullptr, json, npy));
  }
  json += ",\"npy\":" + JsonStringArray(npy);
  return absl::OkStatus();
}

}  // namespace gatescope::client
