#include "client/classification_output.h"

#include <cstdio>
#include <filesystem>

#include "client/file_io.h"
#include "client/json_writer.h"
#include "client/map_tensors.h"
#include "client/npy_writer.h"
#include "client/panel.h"

namespace gatescope::client {
namespace {

using ::gatescope::v1::ExplainRequest;
using ::gatescope::v1::ExplainResponse;
using ::gatescope::v1::Tensor;

std::vector<int64_t> ShapeOf(const Tensor& t) { return {t.shape().begin(), t.shape().end()}; }

// The .npy files of one input: <stem>.<name>.npy; remembers their paths and whether every
// write succeeded.
class NpyFiles {
 public:
  explicit NpyFiles(std::string stem) : stem_(std::move(stem)) {}

  void Add(const std::string& name, const std::vector<int64_t>& shape, const std::string& bytes) {
    const std::string path = stem_ + "." + name + ".npy";
    ok_ &= WriteNpy(path, shape, bytes);
    paths_.push_back(path);
  }
  void Add(const std::string& name, const Tensor& t) { Add(name, ShapeOf(t), t.data()); }
  void AddLayers(const std::string& name, const TensorList& layers, const std::string& what,
                 int rank = 3) {
    if (layers.empty()) return;
    absl::StatusOr<StackedMaps> stacked = StackLayers(layers, what, rank);
    if (stacked.ok()) Add(name, stacked->shape, stacked->bytes);
    ok_ &= stacked.ok();
  }

  bool ok() const { return ok_; }
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::string stem_;
  bool ok_ = true;
  std::vector<std::string> paths_;
};

}  // namespace

std::string ClassesJson(const ClassList& classes) {
  std::string json = "[";
  for (int i = 0; i < classes.size(); ++i) {
    json += (i ? "," : "") + std::string("{\"label\":") + JsonString(classes.Get(i).label()) +
            ",\"score\":" + JsonNumber(classes.Get(i).probability()) + "}";
  }
  return json + "]";
}

std::string TopClassesJson(const ClassList& classes) {
  std::string json;
  if (!classes.empty()) {
    json += ",\"label\":" + JsonString(classes.Get(0).label()) +
            ",\"score\":" + JsonNumber(classes.Get(0).probability());
  }
  return json + ",\"topk\":" + ClassesJson(classes);
}

absl::Status CheckExplainResponse(const ExplainResponse& resp) {
  absl::Status st;
  if (resp.has_rollout()) st.Update(CheckMap(resp.rollout(), 2, "rollout"));
  if (resp.has_vigilance()) st.Update(CheckMap(resp.vigilance(), 2, "vigilance"));
  for (const Tensor& t : resp.attention()) st.Update(CheckMap(t, 3, "attention"));
  for (const Tensor& t : resp.attention_resonance()) {
    st.Update(CheckMap(t, 3, "attention resonance"));
  }
  st.Update(StackLayers(resp.plug_gates(), "PLuG gate", 2).status());
  st.Update(StackLayers(resp.gates(), "gate").status());
  st.Update(StackLayers(resp.resonance(), "resonance").status());
  return st;
}

std::string TopClassText(const ClassList& classes) {
  if (classes.empty()) return "";
  char score[16];
  std::snprintf(score, sizeof(score), "%.3f", classes.Get(0).probability());
  return classes.Get(0).label() + " " + score;
}

cv::Mat ExplainPanel(const cv::Mat& image, const ExplainResponse& resp, const std::string& model,
                     ScaleMode scale) {
  MapPanel panel(image, TileSize(image.size()), scale);
  panel.AddInput();
  if (resp.has_rollout()) panel.AddMap(GridMat(resp.rollout()), "rollout", "rollout");
  for (int l = 0; l < resp.gates_size(); ++l) {
    panel.AddMap(HeadMeanMat(resp.gates(l)), "gate L" + std::to_string(l), "gate");
  }
  for (int l = 0; l < resp.resonance_size(); ++l) {
    panel.AddMap(HeadMeanMat(resp.resonance(l)), "res L" + std::to_string(l), "resonance");
  }
  for (int l = 0; l < resp.plug_gates_size(); ++l) {
    cv::Mat row = GateRowMat(resp.plug_gates(l));
    if (row.empty()) break;  // tokens are not a class token plus a square grid
    panel.AddMap(std::move(row), "plug L" + std::to_string(l), "plug");
  }
  return panel.Render(model + ": " + TopClassText(resp.classes()) + "  (scale: " +
                      ScaleModeName(scale) + ")");
}

absl::StatusOr<std::vector<std::string>> WriteNpyOutputs(const std::string& file,
                                                         const std::string& stem,
                                                         const ExplainRequest& req,
                                                         const ExplainResponse& resp) {
  NpyFiles npy(stem);
  if (resp.has_rollout()) npy.Add("rollout", resp.rollout());
  npy.AddLayers("gates", resp.gates(), "gate");
  npy.AddLayers("resonance", resp.resonance(), "resonance");
  if (resp.has_vigilance()) npy.Add("vigilance", resp.vigilance());
  npy.AddLayers("plug_gates", resp.plug_gates(), "PLuG gate", 2);
  auto layer = [&](int i) {
    return std::to_string(i < req.attention_layers_size() ? req.attention_layers(i) : i);
  };
  for (int i = 0; i < resp.attention_size(); ++i) {
    npy.Add("attention.L" + layer(i), resp.attention(i));
  }
  for (int i = 0; i < resp.attention_resonance_size(); ++i) {
    npy.Add("attention_resonance.L" + layer(i), resp.attention_resonance(i));
  }
  std::vector<std::string> names;
  for (const std::string& path : npy.paths()) {
    names.push_back(std::filesystem::path(path).filename().string());
  }
  const std::string json = "{\"file\":" + JsonString(file) +
                           ",\"classes\":" + ClassesJson(resp.classes()) +
                           ",\"npy\":" + JsonStringArray(names) + "}\n";
  if (!WriteBytes(stem + ".json", json) || !npy.ok()) {
    return absl::InternalError("cannot write the maps under " + stem);
  }
  return npy.paths();
}

absl::Status WriteJsonOutput(const std::string& file, const std::string& stem,
                             const ExplainResponse& resp) {
  std::string json =
      "{\"file\":" + JsonString(file) + ",\"classes\":" + ClassesJson(resp.classes());
  if (resp.has_rollout()) json += ",\"rollout\":" + TensorJson(resp.rollout());
  json += ",\"gates\":" + TensorListJson(resp.gates());
  json += ",\"attention\":" + TensorListJson(resp.attention());
  json += ",\"resonance\":" + TensorListJson(resp.resonance());
  if (resp.has_vigilance()) json += ",\"vigilance\":" + TensorJson(resp.vigilance());
  json += ",\"attention_resonance\":" + TensorListJson(resp.attention_resonance());
  json += ",\"plug_gates\":" + TensorListJson(resp.plug_gates());
  if (!WriteBytes(stem + ".json", json + "}\n")) {
    return absl::InternalError("cannot write " + stem + ".json");
  }
  return absl::OkStatus();
}

}  // namespace gatescope::client
