#include "client/segmentation_output.h"

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
                             const std::string& png_name, const cv::Mat& image,
                             const google::protobuf::RepeatedPtrField<Tensor>& maps,
                             const ::gatescope::v1::QueryPixel* query, std::string& json,
                             std::vector<std::string>& npy) {
  const cv::Size tile = TileSize(image.size(), 112, 1024);
  std::vector<cv::Mat> tiles = {InputTile(image, tile)};
  std::vector<std::string> captions = {"input"};
  for (int s = 0; s < maps.size(); ++s) {
    GS_ASSIGN_OR_RETURN(const cv::Mat map, MapFromProto(maps.Get(s), kind));
    tiles.push_back(OverlayTile(image, map, tile));
    captions.push_back(kind + " s" + std::to_string(s) + " (" + std::to_string(map.rows) + "x" +
                       std::to_string(map.cols) + ")");
    const std::string path = prefix + kind + ".s" + std::to_string(s) + ".npy";
    if (!WriteNpy(path, ShapeOf(maps.Get(s)), maps.Get(s).data())) {
      return absl::InternalError("cannot write " + path);
    }
    npy.push_back(path);
  }
  if (query != nullptr) {
    for (cv::Mat& t : tiles) MarkPixel(t, image.size(), query->y(), query->x());
  }
  const std::string path = prefix + png_name;
  if (!WritePng(path, ComposePanel(tiles, captions))) {
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

absl::Status WriteExplainFiles(const std::string& prefix, const cv::Mat& image,
                               const ::gatescope::v1::ExplainResponse& resp,
                               const ::gatescope::v1::QueryPixel* query,
                               const std::vector<std::string>& labels, std::string& json) {
  GS_RETURN_IF_ERROR(WriteMaskPicture(prefix, image, resp.segmentation(), labels, json).status());
  std::vector<std::string> npy;
  if (resp.gates_size() > 0) {
    GS_RETURN_IF_ERROR(
        WriteStagePanel(prefix, "gate", "gates.png", image, resp.gates(), nullptr, json, npy));
  }
  if (resp.query_attention_size() > 0) {
    GS_RETURN_IF_ERROR(WriteStagePanel(prefix, "query_attention", "query_attention.png", image,
                                       resp.query_attention(), query, json, npy));
  }
  json += ",\"npy\":" + JsonStringArray(npy);
  return absl::OkStatus();
}

}  // namespace gatescope::client
