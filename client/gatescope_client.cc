// gatescope-client: command-line client of the gatescope.v1 API.
//
//   gatescope-client predict --server ADDR --model NAME [--version V] [--top-k K]
//       [--timeout-ms MS] [--raw-shape C,H,W --raw-dtype uint8|float32]
//       [--out DIR [--probabilities]] [--score-threshold T] [--max-detections N]
//       [--image FILE] FILE...
//     (--image FILE names an input like a positional FILE, for every command.)
//   gatescope-client models --server ADDR
//   gatescope-client health --server ADDR [--service NAME]
//   gatescope-client services --server ADDR     (lists services via server reflection)
//   gatescope-client explain --server ADDR --model NAME [--rollout] [--gates] [--resonance]
//       [--plug-gates] [--layers 0,2 [--heads 0,1] [--queries 0,5]]
//       [--head-fusion mean|max|min] [--signed clamp|abs|raw]
//       [--discard-ratio R] [--start-layer L] [--format npy|json] --out DIR FILE...
//     per input (<stem> = DIR/<file name>, extension kept; a repeated name gets .2, .3, ...):
//       <stem>.panel.png    input | rollout | gate L<l> per layer | res L<l> per layer |
//                           plug L<l> per layer (head-mean maps over the input; PLuG: the
//                           first returned gate row over the patches; only those requested);
//       <stem>.rollout.png  the server's rollout overlay (with --rollout);
//       --format npy (default): <stem>.rollout.npy [gh,gw], <stem>.gates.npy [L,H,gh,gw],
//         <stem>.resonance.npy [L,H,gh,gw], <stem>.vigilance.npy [L,H],
//         <stem>.attention.L<l>.npy and <stem>.attention_resonance.L<l>.npy [H,N,N]
//         (restricted by --heads / --queries), <stem>.plug_gates.npy [L,queries,N], and
//         <stem>.json (classes and the .npy file names);
//       --format json: <stem>.json with the classes and every map as nested arrays.
//   gatescope-client explain --server ADDR --model SEGMENTATION_MODEL [--gates]
//       [--query Y,X] --out DIR FILE...
//     per input (<p> = DIR/ for one input, else <stem>.), see segmentation_output.h:
//       <p>mask.png             the class map over the input, with a legend;
//       <p>gates.png            input | gate s<k> per decoder stage (with --gates);
//       <p>gate.s<k>.npy        float32 [h_k, w_k];
//       <p>query_attention.png  input | attention of pixel (Y, X) per stage, the pixel
//                               marked (with --query);
//       <p>query_attention.s<k>.npy  float32 [h_k, w_k];
//     and prints {"file":..., "height":H0, "width":W0, "class_pixels":{"<label>":n, ...},
//       "mask":..., "gates":..., "query_attention":..., "npy":[...]}.
//   gatescope-client explain --server ADDR --model DETECTION_MODEL [--plug-gates]
//       [--score-threshold T] [--max-detections N] --out DIR FILE...
//     per input (<p> as for segmentation), see detection_output.h: <p>sampling_points.png
//     (boxes and the last decoder layer's sampling points), <p>detection<i>.*.npy
//     (sampling points, attention weights, PLuG gates), <p>encoder_plug_gates.png; prints
//     {"file":..., "detections":[...], "sampling_points":..., "npy":[...]}.
//   gatescope-client explain --server ADDR --compare MODEL1,MODEL2,... [--head-fusion ...]
//       [--signed ...] [--discard-ratio R] [--start-layer L] --out DIR FILE...
//     per input <stem>.compare.png: the input, then each model's rollout over it captioned
//     "<model>: <top-1 label>" (a grey "<model>: error" tile where the model failed).
//   explain prints one JSON line per input naming what it wrote, and one error line per
//   failed input (or failed model with --compare); exits 2 if any failed.
//
// predict prints one JSON object per input, in order:
//   {"file":..., "label":..., "score":..., "topk":[{"label":..., "score":...}, ...]}
// or, for segmentation models,
//   {"file":..., "height":H0, "width":W0, "class_pixels":{"<label>":pixels, ...}} with,
//   when --out DIR is given, "mask":<p>mask.png (classes over the input, legend),
//   "mask_raw":<p>mask_raw.png (the server's 8-bit class-index PNG) and, with
//   --probabilities, "probabilities":<p>probabilities.npy (float32 [classes, H0, W0]);
//   <p> is DIR/ for one input, DIR/<file name>. for several;
// or, for detection models (--score-threshold T, --max-detections N),
//   {"file":..., "detections":[{"label":..., "label_index":..., "score":...,
//   "box":[x1,y1,x2,y2], "query":...}, ...]} with, when --out DIR is given,
//   "boxes":<p>boxes.png (the boxes over the input);
// or {"file":..., "error":{"code":"INVALID_ARGUMENT", "message":...}}; exits 2 if any failed.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "client/cli_args.h"
#include "client/detection_output.h"
#include "client/file_io.h"
#include "client/json_writer.h"
#include "client/npy_writer.h"
#include "client/panel.h"
#include "client/segmentation_output.h"
#include "client/status_names.h"
#include "gatescope/v1/inference.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

#include <opencv2/imgcodecs.hpp>

namespace gatescope::client {
namespace {

using ::gatescope::v1::Inference;

const char kUsage[] =
    "usage: gatescope-client predict --server ADDR --model NAME [--version V] [--top-k K]\n"
    "           [--timeout-ms MS] [--raw-shape C,H,W --raw-dtype uint8|float32]\n"
    "           [--out DIR [--probabilities]] [--score-threshold T] [--max-detections N]\n"
    "           [--image FILE] FILE...\n"
    "       gatescope-client models --server ADDR\n"
    "       gatescope-client health --server ADDR [--service NAME]\n"
    "       gatescope-client services --server ADDR\n"
    "       gatescope-client explain --server ADDR --model NAME [--rollout] [--gates]\n"
    "           [--resonance] [--plug-gates] [--layers 0,2 [--heads 0,1] [--queries 0,5]]\n"
    "           [--head-fusion mean|max|min]\n"
    "           [--signed clamp|abs|raw] [--discard-ratio R] [--start-layer L]\n"
    "           [--format npy|json] --out DIR FILE...\n"
    "       gatescope-client explain --server ADDR --model SEGMENTATION_MODEL [--gates]\n"
    "           [--query Y,X] --out DIR [--image FILE] FILE...\n"
    "       gatescope-client explain --server ADDR --model DETECTION_MODEL [--plug-gates]\n"
    "           [--score-threshold T] [--max-detections N] --out DIR [--image FILE] FILE...\n"
    "       gatescope-client explain --server ADDR --compare MODEL1,MODEL2,...\n"
    "           [--head-fusion ...] [--signed ...] [--discard-ratio R] [--start-layer L]\n"
    "           --out DIR FILE...\n";

std::string ErrorLine(const std::string& file, const std::string& code, const std::string& msg) {
  return "{\"file\":" + JsonString(file) + ",\"error\":{\"code\":" + JsonString(code) +
         ",\"message\":" + JsonString(msg) + "}}";
}

std::shared_ptr<grpc::Channel> Channel(const Args& args) {
  auto it = args.flags.find("server");
  const std::string addr = it == args.flags.end() ? "127.0.0.1:8001" : it->second;
  grpc::ChannelArguments ch;
  ch.SetMaxSendMessageSize(16 << 20);
  ch.SetMaxReceiveMessageSize(256 << 20);  // explanations with many layers are large
  return grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), ch);
}

std::unique_ptr<Inference::Stub> Connect(const Args& args) {
  return Inference::NewStub(Channel(args));
}

// Prints {"service":..., "status":"SERVING"|...}; exits 0 only when SERVING.
int Health(const Args& args) {
  auto it = args.flags.find("service");
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(it == args.flags.end() ? "" : it->second);
  auto stub = grpc::health::v1::Health::NewStub(Channel(args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status st = stub->Check(&ctx, request, &response);
  if (!st.ok()) {
    std::cout << ErrorLine("", CodeName(st.error_code()), st.error_message()) << std::endl;
    return 2;
  }
  std::cout << "{\"service\":" << JsonString(request.service()) << ",\"status\":"
            << JsonString(grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                   response.status()))
            << "}" << std::endl;
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 3;
}

// Output path prefix for `file` under `out_dir`: its whole file name (extension kept); a
// repeated name gets a counter so no input's results overwrite another's.
std::string UniqueStem(const std::string& out_dir, const std::string& file,
                       std::set<std::string>& used) {
  const std::string base = std::filesystem::path(file).filename().string();
  std::string stem = (std::filesystem::path(out_dir) / base).string();
  for (int n = 2; used.count(stem); ++n) {
    stem = (std::filesystem::path(out_dir) / (base + "." + std::to_string(n))).string();
  }
  used.insert(stem);
  return stem;
}

bool MakeOutDir(const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir)) {
    std::cout << ErrorLine(out_dir, "CLIENT", "cannot create the output directory") << std::endl;
    return false;
  }
  return true;
}

// Where one input's segmentation files go: DIR/ for a single input, else DIR/<file name>.
// (UniqueStem) so that inputs do not overwrite each other's files.
std::string SegmentationPrefix(const Args& args, const std::string& out_dir,
                               const std::string& file, std::set<std::string>& used) {
  if (args.positional.size() == 1) return (std::filesystem::path(out_dir) / "").string();
  return UniqueStem(out_dir, file, used) + ".";
}

// The model's config from GetModelMetadata; empty (no labels, no task) if it cannot be
// had (then class indices name the classes, and the request's own errors speak).
v1::ModelConfig FetchConfig(Inference::Stub& stub, const Args& args) {
  v1::ModelMetadataRequest request;
  request.set_model_name(args.Get("model", ""));
  request.set_model_version(args.Get("version", ""));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ModelMetadataResponse response;
  if (!stub.GetModelMetadata(&ctx, request, &response).ok()) return {};
  return response.config();
}

std::vector<std::string> FetchLabels(Inference::Stub& stub, const Args& args) {
  const v1::ModelConfig config = FetchConfig(stub, args);
  return {config.labels().begin(), config.labels().end()};
}

// Sets the detection fields of a Predict or Explain request from --score-threshold and
// --max-detections (only when given: other models refuse them). False, with a message on
// stderr, when a value is not a number (range checks are the server's).
template <typename Request>
bool SetDetectionOptions(const Args& args, Request& request) {
  if (const std::string t = args.Get("score-threshold", ""); !t.empty()) {
    char* end = nullptr;
    const float v = std::strtof(t.c_str(), &end);
    if (end == t.c_str() || *end != '\0') {
      std::cerr << "--score-threshold wants a number, got '" << t << "'\n";
      return false;
    }
    request.set_score_threshold(v);
  }
  if (const std::string m = args.Get("max-detections", ""); !m.empty()) {
    char* end = nullptr;
    const long v = std::strtol(m.c_str(), &end, 10);
    if (end == m.c_str() || *end != '\0' || v < INT32_MIN || v > INT32_MAX) {
      std::cerr << "--max-detections wants an integer, got '" << m << "'\n";
      return false;
    }
    request.set_max_detections(static_cast<int32_t>(v));
  }
  return true;
}

int Predict(const Args& args) {
  auto get = [&](const std::string& k, const std::string& def) { return args.Get(k, def); };
  const std::string model = get("model", "");
  if (model.empty() || args.positional.empty()) {
    std::cerr << kUsage;
    return 1;
  }
  const int top_k = std::atoi(get("top-k", "5").c_str());
  const int timeout_ms = std::atoi(get("timeout-ms", "30000").c_str());
  const std::string raw_shape = get("raw-shape", "");
  const std::string raw_dtype = get("raw-dtype", "uint8");
  const std::string out_dir = get("out", "");
  if (!out_dir.empty() && !MakeOutDir(out_dir)) return 1;
  auto stub = Connect(args);
  const bool detection = FetchConfig(*stub, args).task() == "object_detection";
  int failures = 0;
  std::set<std::string> used_stems;
  std::optional<std::vector<std::string>> labels;  // fetched with the first segmentation
  for (const std::string& file : args.positional) {
    v1::PredictRequest request;
    if (!SetDetectionOptions(args, request)) return 1;
    request.set_model_name(model);
    request.set_model_version(get("version", ""));
    request.set_top_k(top_k);
    // Segmentation models only (classifiers ignore them).
    request.set_mask_png(!out_dir.empty());
    request.set_class_probabilities(!out_dir.empty() && get("probabilities", "") == "true");
    std::string bytes;
    if (!ReadFile(file, bytes)) {
      std::cout << ErrorLine(file, "CLIENT", "cannot read file") << std::endl;
      ++failures;
      continue;
    }
    if (raw_shape.empty()) {
      request.set_image(std::move(bytes));
    } else {
      auto* t = request.mutable_tensor();
      t->set_dtype(raw_dtype == "float32" ? v1::Tensor::FLOAT32 : v1::Tensor::UINT8);
      std::stringstream ss(raw_shape);
      for (std::string dim; std::getline(ss, dim, ',');) t->add_shape(std::atoll(dim.c_str()));
      t->set_data(std::move(bytes));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    v1::PredictResponse response;
    const grpc::Status st = stub->Predict(&ctx, request, &response);
    if (!st.ok()) {
      std::cout << ErrorLine(file, CodeName(st.error_code()), st.error_message()) << std::endl;
      ++failures;
      continue;
    }
    std::string line = "{\"file\":" + JsonString(file);
    if (detection) {
      line += DetectionsJson(response.detections());
      std::string why;
      if (!out_dir.empty() &&
          !WriteDetectionPicture(SegmentationPrefix(args, out_dir, file, used_stems),
                                 raw_shape.empty() ? DecodeBgr(request.image()) : cv::Mat(),
                                 response.detections(), line, why)) {
        std::cout << ErrorLine(file, "CLIENT", why) << std::endl;
        ++failures;
        continue;
      }
      std::cout << line << "}" << std::endl;
      continue;
    }
    if (response.has_segmentation()) {
      if (!labels) labels = FetchLabels(*stub, args);
      line += SegmentationJson(response.segmentation(), *labels);
      std::string why;
      if (!out_dir.empty() &&
          !WritePredictFiles(SegmentationPrefix(args, out_dir, file, used_stems),
                             raw_shape.empty() ? DecodeBgr(request.image()) : cv::Mat(),
                             response.segmentation(), *labels, line, why)) {
        std::cout << ErrorLine(file, "CLIENT", why) << std::endl;
        ++failures;
        continue;
      }
      std::cout << line << "}" << std::endl;
      continue;
    }
    if (response.classes_size() > 0) {
      line += ",\"label\":" + JsonString(response.classes(0).label()) +
              ",\"score\":" + JsonNumber(response.classes(0).probability());
    }
    line += ",\"topk\":[";
    for (int i = 0; i < response.classes_size(); ++i) {
      const auto& c = response.classes(i);
      line += (i ? "," : "") + std::string("{\"label\":") + JsonString(c.label()) +
              ",\"score\":" + JsonNumber(c.probability()) + "}";
    }
    std::cout << line << "]}" << std::endl;
  }
  return failures ? 2 : 0;
}

int Models(const Args& args) {
  auto stub = Connect(args);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListModelsResponse response;
  const grpc::Status st = stub->ListModels(&ctx, v1::ListModelsRequest(), &response);
  if (!st.ok()) {
    std::cout << ErrorLine("", CodeName(st.error_code()), st.error_message()) << std::endl;
    return 2;
  }
  for (const auto& m : response.models()) {
    std::cout << "{\"name\":" << JsonString(m.name()) << ",\"version\":" << JsonString(m.version())
              << ",\"ready\":" << (m.ready() ? "true" : "false")
              << ",\"task\":" << JsonString(m.task()) << "}" << std::endl;
  }
  return 0;
}

// JSON array of a FLOAT32 tensor, nested by its shape (the tensor checked by CheckMap).
std::string TensorJson(const v1::Tensor& t) {
  std::vector<float> data(t.data().size() / sizeof(float));
  std::memcpy(data.data(), t.data().data(), data.size() * sizeof(float));
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  size_t pos = 0;
  std::function<std::string(size_t)> nest = [&](size_t dim) -> std::string {
    std::string out = "[";
    for (int64_t i = 0; i < shape[dim]; ++i) {
      if (i) out += ",";
      if (dim + 1 == shape.size()) {
        out += pos < data.size() ? JsonNumber(data[pos]) : "null";
        ++pos;
      } else {
        out += nest(dim + 1);
      }
    }
    return out + "]";
  };
  return shape.empty() ? "[]" : nest(0);
}

std::string TensorListJson(const google::protobuf::RepeatedPtrField<v1::Tensor>& ts) {
  std::string out = "[";
  for (int i = 0; i < ts.size(); ++i) out += (i ? "," : "") + TensorJson(ts.Get(i));
  return out + "]";
}

// True if `t` is FLOAT32 with `rank` non-negative dims and exactly their elements' bytes;
// otherwise false with `why` naming the map `name`.
bool CheckMap(const v1::Tensor& t, int rank, const std::string& name, std::string& why) {
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  const int64_t n = NpyElements(shape);
  if (t.dtype() != v1::Tensor::FLOAT32 || t.shape_size() != rank || n < 0 ||
      static_cast<uint64_t>(n) * 4 != t.data().size()) {
    why = "malformed " + name + " map in the response";
    return false;
  }
  return true;
}

// The layers' maps of `rank` dims (e.g. [H, gh, gw]) stacked to [L, ...] (shape and
// little-endian bytes); false with `why` if a layer is malformed or the shapes differ.
bool StackLayers(const google::protobuf::RepeatedPtrField<v1::Tensor>& layers,
                 const std::string& name, std::vector<int64_t>& shape, std::string& bytes,
                 std::string& why, int rank = 3) {
  shape.clear();
  bytes.clear();
  for (const v1::Tensor& t : layers) {
    if (!CheckMap(t, rank, name, why)) return false;
    const std::vector<int64_t> s(t.shape().begin(), t.shape().end());
    if (shape.empty()) {
      shape = {static_cast<int64_t>(layers.size())};
      shape.insert(shape.end(), s.begin(), s.end());
    } else if (!std::equal(s.begin(), s.end(), shape.begin() + 1)) {
      why = name + " maps differ in shape across layers";
      return false;
    }
    bytes += t.data();
  }
  return true;
}

// A [rows, cols] FLOAT32 tensor (checked) as a CV_32FC1 Mat.
cv::Mat GridMat(const v1::Tensor& t) {
  cv::Mat m(static_cast<int>(t.shape(0)), static_cast<int>(t.shape(1)), CV_32FC1);
  std::memcpy(m.ptr<float>(), t.data().data(), t.data().size());
  return m;
}

// Row 0 of a [queries, N] FLOAT32 tensor (checked) over the patches, as a square CV_32FC1
// grid (tokens: class token, then the grid row-major); empty if N - 1 is not a square.
cv::Mat GateRowMat(const v1::Tensor& t) {
  const int n = static_cast<int>(t.shape(1));
  const int side = static_cast<int>(std::lround(std::sqrt(std::max(0, n - 1))));
  if (t.shape(0) < 1 || side * side != n - 1 || side == 0) return {};
  cv::Mat m(side, side, CV_32FC1);
  std::memcpy(m.ptr<float>(), t.data().data() + sizeof(float), sizeof(float) * (n - 1));
  return m;
}

// The head mean of an [H, rows, cols] FLOAT32 tensor (checked) as a CV_32FC1 Mat.
cv::Mat HeadMeanMat(const v1::Tensor& t) {
  std::vector<float> v(t.data().size() / sizeof(float));
  std::memcpy(v.data(), t.data().data(), t.data().size());
  return HeadMean(v.data(), static_cast<int>(t.shape(0)), static_cast<int>(t.shape(1)),
                  static_cast<int>(t.shape(2)));
}

// `render()`, or an empty Mat (which WritePng refuses) if OpenCV throws.
template <typename Render>
cv::Mat Rendered(Render render) {
  try {
    return render();
  } catch (const cv::Exception&) {
    return {};
  }
}

std::string ModelErrorLine(const std::string& file, const std::string& model,
                           const std::string& code, const std::string& msg) {
  return "{\"file\":" + JsonString(file) + ",\"model\":" + JsonString(model) +
         ",\"error\":{\"code\":" + JsonString(code) + ",\"message\":" + JsonString(msg) + "}}";
}

std::string ClassesJson(const v1::ExplainResponse& resp) {
  std::string json = "[";
  for (int i = 0; i < resp.classes_size(); ++i) {
    json += (i ? "," : "") + std::string("{\"label\":") + JsonString(resp.classes(i).label()) +
            ",\"score\":" + JsonNumber(resp.classes(i).probability()) + "}";
  }
  return json + "]";
}

// The request for `model` on `image` with the command's rollout options.
v1::ExplainRequest ExplainRequestFor(const Args& args, const std::string& model,
                                     const std::string& image) {
  v1::ExplainRequest req;
  req.set_model_name(model);
  req.set_model_version(args.Get("version", ""));
  auto* ro = req.mutable_rollout_options();
  ro->set_head_fusion(args.Get("head-fusion", ""));
  ro->set_signed_maps(args.Get("signed", ""));
  ro->set_discard_ratio(std::atof(args.Get("discard-ratio", "0").c_str()));
  ro->set_start_layer(std::atoi(args.Get("start-layer", "0").c_str()));
  req.set_image(image);
  return req;
}

grpc::Status CallExplain(Inference::Stub& stub, const Args& args, const v1::ExplainRequest& req,
                         v1::ExplainResponse& resp) {
  const int timeout_ms = std::atoi(args.Get("timeout-ms", "60000").c_str());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  return stub.Explain(&ctx, req, &resp);
}

// True if every map in `resp` is well formed; otherwise false with `why`.
bool CheckResponse(const v1::ExplainResponse& resp, std::string& why) {
  std::vector<int64_t> shape;
  std::string bytes;
  if (resp.has_rollout() && !CheckMap(resp.rollout(), 2, "rollout", why)) return false;
  if (resp.has_vigilance() && !CheckMap(resp.vigilance(), 2, "vigilance", why)) return false;
  for (const auto& t : resp.attention()) {
    if (!CheckMap(t, 3, "attention", why)) return false;
  }
  for (const auto& t : resp.attention_resonance()) {
    if (!CheckMap(t, 3, "attention resonance", why)) return false;
  }
  return StackLayers(resp.plug_gates(), "PLuG gate", shape, bytes, why, 2) &&
         StackLayers(resp.gates(), "gate", shape, bytes, why) &&
         StackLayers(resp.resonance(), "resonance", shape, bytes, why);
}

// The input tile, then the rollout, the head-mean gate map of every layer and the head-mean
// resonance of every layer (those the response holds) over the input.
cv::Mat ExplainPanel(const cv::Mat& image, const v1::ExplainResponse& resp) {
  const cv::Size tile = TileSize(image.size());
  std::vector<cv::Mat> tiles = {InputTile(image, tile)};
  std::vector<std::string> captions = {"input"};
  if (resp.has_rollout()) {
    tiles.push_back(OverlayTile(image, GridMat(resp.rollout()), tile));
    captions.push_back("rollout");
  }
  for (int l = 0; l < resp.gates_size(); ++l) {
    tiles.push_back(OverlayTile(image, HeadMeanMat(resp.gates(l)), tile));
    captions.push_back("gate L" + std::to_string(l));
  }
  for (int l = 0; l < resp.resonance_size(); ++l) {
    tiles.push_back(OverlayTile(image, HeadMeanMat(resp.resonance(l)), tile));
    captions.push_back("res L" + std::to_string(l));
  }
  for (int l = 0; l < resp.plug_gates_size(); ++l) {
    cv::Mat row = GateRowMat(resp.plug_gates(l));
    if (row.empty()) break;  // tokens are not a class token plus a square grid
    tiles.push_back(OverlayTile(image, row, tile));
    captions.push_back("plug L" + std::to_string(l));
  }
  return ComposePanel(tiles, captions);
}

// Writes the raw maps of `resp` as <stem>.<map>.npy files and <stem>.json (the classes and
// the .npy file names); appends the paths written to `written`.
bool WriteNpyOutputs(const std::string& file, const std::string& stem,
                     const v1::ExplainRequest& req, const v1::ExplainResponse& resp,
                     std::vector<std::string>& written) {
  bool ok = true;
  auto write = [&](const std::string& name, const std::vector<int64_t>& shape,
                   const std::string& bytes) {
    const std::string path = stem + "." + name + ".npy";
    ok &= WriteNpy(path, shape, bytes);
    written.push_back(path);
  };
  auto shape_of = [](const v1::Tensor& t) {
    return std::vector<int64_t>(t.shape().begin(), t.shape().end());
  };
  std::vector<int64_t> shape;
  std::string bytes, why;
  if (resp.has_rollout()) write("rollout", shape_of(resp.rollout()), resp.rollout().data());
  if (resp.gates_size() && StackLayers(resp.gates(), "gate", shape, bytes, why)) {
    write("gates", shape, bytes);
  }
  if (resp.resonance_size() && StackLayers(resp.resonance(), "resonance", shape, bytes, why)) {
    write("resonance", shape, bytes);
  }
  if (resp.has_vigilance()) write("vigilance", shape_of(resp.vigilance()), resp.vigilance().data());
  if (resp.plug_gates_size() &&
      StackLayers(resp.plug_gates(), "PLuG gate", shape, bytes, why, 2)) {
    write("plug_gates", shape, bytes);
  }
  auto layer = [&](int i) {
    return std::to_string(i < req.attention_layers_size() ? req.attention_layers(i) : i);
  };
  for (int i = 0; i < resp.attention_size(); ++i) {
    write("attention.L" + layer(i), shape_of(resp.attention(i)), resp.attention(i).data());
  }
  for (int i = 0; i < resp.attention_resonance_size(); ++i) {
    write("attention_resonance.L" + layer(i), shape_of(resp.attention_resonance(i)),
          resp.attention_resonance(i).data());
  }
  std::string json = "{\"file\":" + JsonString(file) + ",\"classes\":" + ClassesJson(resp) +
                     ",\"npy\":[";
  for (size_t i = 0; i < written.size(); ++i) {
    json += (i ? "," : "") + JsonString(std::filesystem::path(written[i]).filename().string());
  }
  return WriteBytes(stem + ".json", json + "]}\n") && ok;
}

// Writes <stem>.json with the classes and every map as nested arrays.
bool WriteJsonOutput(const std::string& file, const std::string& stem,
                     const v1::ExplainResponse& resp) {
  std::string json = "{\"file\":" + JsonString(file) + ",\"classes\":" + ClassesJson(resp);
  if (resp.has_rollout()) json += ",\"rollout\":" + TensorJson(resp.rollout());
  json += ",\"gates\":" + TensorListJson(resp.gates());
  json += ",\"attention\":" + TensorListJson(resp.attention());
  json += ",\"resonance\":" + TensorListJson(resp.resonance());
  if (resp.has_vigilance()) json += ",\"vigilance\":" + TensorJson(resp.vigilance());
  json += ",\"attention_resonance\":" + TensorListJson(resp.attention_resonance());
  json += ",\"plug_gates\":" + TensorListJson(resp.plug_gates());
  return WriteBytes(stem + ".json", json + "}\n");
}

// Reads and decodes `file` (bytes and BGR image); prints an error line if it cannot.
bool ReadImage(const std::string& file, std::string& bytes, cv::Mat& image) {
  if (!ReadFile(file, bytes)) {
    std::cout << ErrorLine(file, "CLIENT", "cannot read file") << std::endl;
    return false;
  }
  image = DecodeBgr(bytes);
  if (image.empty()) {
    std::cout << ErrorLine(file, "CLIENT", "cannot decode the image") << std::endl;
    return false;
  }
  return true;
}

// --compare: one <stem>.compare.png per input with each model's rollout over it.
int Compare(const Args& args, const std::string& out_dir) {
  std::vector<std::string> models;
  std::stringstream list(args.Get("compare", ""));
  for (std::string m; std::getline(list, m, ',');) {
    if (!m.empty()) models.push_back(m);
  }
  if (models.empty()) {
    std::cerr << kUsage;
    return 1;
  }
  auto stub = Connect(args);
  int failures = 0;
  std::set<std::string> used_stems;
  for (const std::string& file : args.positional) {
    std::string bytes;
    cv::Mat image;
    if (!ReadImage(file, bytes, image)) {
      ++failures;
      continue;
    }
    const cv::Size tile = TileSize(image.size());
    std::vector<cv::Mat> tiles = {InputTile(image, tile)};
    std::vector<std::string> captions = {"input"};
    std::string rendered;
    for (const std::string& model : models) {
      v1::ExplainRequest req = ExplainRequestFor(args, model, bytes);
      req.set_rollout(true);
      v1::ExplainResponse resp;
      const grpc::Status st = CallExplain(*stub, args, req, resp);
      std::string code = "CLIENT", why;
      bool ok = st.ok();
      if (!ok) {
        code = CodeName(st.error_code());
        why = st.error_message();
      } else if (!resp.has_rollout()) {
        ok = false;
        why = "no rollout in the response";
      } else {
        ok = CheckMap(resp.rollout(), 2, "rollout", why);
      }
      if (!ok) {
        std::cout << ModelErrorLine(file, model, code, why) << std::endl;
        ++failures;
        tiles.push_back(cv::Mat(tile, CV_8UC3, cv::Scalar(48, 48, 48)));
        captions.push_back(model + ": error");
        continue;
      }
      const std::string label = resp.classes_size() ? resp.classes(0).label() : "";
      tiles.push_back(Rendered([&] { return OverlayTile(image, GridMat(resp.rollout()), tile); }));
      captions.push_back(model + ": " + label);
      rendered += (rendered.empty() ? "" : ",") + std::string("{\"model\":") +
                  JsonString(model) + ",\"label\":" + JsonString(label) + "}";
    }
    const std::string path = UniqueStem(out_dir, file, used_stems) + ".compare.png";
    if (!WritePng(path, Rendered([&] { return ComposePanel(tiles, captions); }))) {
      std::cout << ErrorLine(file, "CLIENT", "cannot render or write " + path) << std::endl;
      ++failures;
      continue;
    }
    std::cout << "{\"file\":" << JsonString(file) << ",\"compare\":" << JsonString(path)
              << ",\"models\":[" << rendered << "]}" << std::endl;
  }
  return failures ? 2 : 0;
}

int Explain(const Args& args) {
  const std::string model = args.Get("model", ""), out_dir = args.Get("out", "");
  const std::string compare = args.Get("compare", ""), format = args.Get("format", "npy");
  if (model.empty() == compare.empty() || out_dir.empty() || args.positional.empty() ||
      (format != "npy" && format != "json")) {
    std::cerr << kUsage;
    return 1;
  }
  std::optional<v1::QueryPixel> query;
  if (!args.Get("query", "").empty()) {
    int y = 0, x = 0;
    char extra = 0;
    if (std::sscanf(args.Get("query", "").c_str(), "%d,%d%c", &y, &x, &extra) != 2) {
      std::cerr << "--query wants Y,X (pixel row and column of the input)\n" << kUsage;
      return 1;
    }
    query.emplace();
    query->set_y(y);
    query->set_x(x);
  }
  if (!MakeOutDir(out_dir)) return 1;
  if (!compare.empty()) return Compare(args, out_dir);
  auto stub = Connect(args);
  const bool detection = FetchConfig(*stub, args).task() == "object_detection";
  int failures = 0;
  std::set<std::string> used_stems;
  std::optional<std::vector<std::string>> labels;  // fetched with the first segmentation
  for (const std::string& file : args.positional) {
    std::string bytes;
    cv::Mat image;
    if (!ReadImage(file, bytes, image)) {
      ++failures;
      continue;
    }
    v1::ExplainRequest req = ExplainRequestFor(args, model, bytes);
    req.set_rollout(args.Get("rollout", "") == "true");
    req.set_gates(args.Get("gates", "") == "true");
    req.set_resonance(args.Get("resonance", "") == "true");
    req.set_plug_gates(args.Get("plug-gates", "") == "true");
    req.set_heatmap_png(req.rollout());
    for (const auto& [flag, add] :
         {std::pair<const char*, void (v1::ExplainRequest::*)(int32_t)>{
              "layers", &v1::ExplainRequest::add_attention_layers},
          {"heads", &v1::ExplainRequest::add_attention_heads},
          {"queries", &v1::ExplainRequest::add_attention_queries}}) {
      std::stringstream items(args.Get(flag, ""));
      for (std::string item; std::getline(items, item, ',');) {
        if (!item.empty()) (req.*add)(std::atoi(item.c_str()));
      }
    }
    if (query) *req.mutable_query_pixel() = *query;
    if (!SetDetectionOptions(args, req)) return 1;
    v1::ExplainResponse resp;
    const grpc::Status st = CallExplain(*stub, args, req, resp);
    std::string why;
    if (st.ok() && detection) {
      std::string line = "{\"file\":" + JsonString(file) + DetectionsJson(resp.detections());
      if (!WriteDetectionExplainFiles(SegmentationPrefix(args, out_dir, file, used_stems), image,
                                      resp, line, why)) {
        std::cout << ErrorLine(file, "CLIENT", why) << std::endl;
        ++failures;
        continue;
      }
      std::cout << line << "}" << std::endl;
      continue;
    }
    if (st.ok() && resp.has_segmentation()) {
      if (!labels) labels = FetchLabels(*stub, args);
      std::string line = "{\"file\":" + JsonString(file) +
                         SegmentationJson(resp.segmentation(), *labels);
      if (!WriteExplainFiles(SegmentationPrefix(args, out_dir, file, used_stems), image, resp,
                             query ? &*query : nullptr, *labels, line, why)) {
        std::cout << ErrorLine(file, "CLIENT", why) << std::endl;
        ++failures;
        continue;
      }
      std::cout << line << "}" << std::endl;
      continue;
    }
    if (!st.ok() || !CheckResponse(resp, why)) {
      std::cout << ErrorLine(file, st.ok() ? "CLIENT" : CodeName(st.error_code()),
                             st.ok() ? why : st.error_message())
                << std::endl;
      ++failures;
      continue;
    }
    const std::string stem = UniqueStem(out_dir, file, used_stems);
    std::vector<std::string> npy;
    bool written = format == "npy" ? WriteNpyOutputs(file, stem, req, resp, npy)
                                   : WriteJsonOutput(file, stem, resp);
    written &= WritePng(stem + ".panel.png", Rendered([&] { return ExplainPanel(image, resp); }));
    std::string line = "{\"file\":" + JsonString(file) + ",\"json\":" +
                       JsonString(stem + ".json") + ",\"panel\":" +
                       JsonString(stem + ".panel.png");
    if (!resp.rollout_png().empty()) {
      written &= WriteBytes(stem + ".rollout.png", resp.rollout_png());
      line += ",\"png\":" + JsonString(stem + ".rollout.png");
    }
    if (!written) {
      std::cout << ErrorLine(file, "CLIENT", "cannot render or write results under " + out_dir)
                << std::endl;
      ++failures;
      continue;
    }
    if (!npy.empty()) {
      line += ",\"npy\":" + JsonStringArray(npy);
    }
    if (resp.classes_size() > 0) line += ",\"label\":" + JsonString(resp.classes(0).label());
    std::cout << line << "}" << std::endl;
  }
  return failures ? 2 : 0;
}

// Prints one {"service":...} line per service the server's reflection lists.
int Services(const Args& args) {
  namespace refl = grpc::reflection::v1alpha;
  auto stub = refl::ServerReflection::NewStub(Channel(args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&ctx);
  refl::ServerReflectionRequest request;
  request.set_list_services("*");
  refl::ServerReflectionResponse response;
  const bool exchanged = stream->Write(request) && stream->WritesDone() && stream->Read(&response);
  for (refl::ServerReflectionResponse extra; stream->Read(&extra);) {
  }
  const grpc::Status st = stream->Finish();
  if (!exchanged || !st.ok()) {
    std::cout << ErrorLine("", CodeName(st.error_code()), st.error_message()) << std::endl;
    return 2;
  }
  for (const auto& service : response.list_services_response().service()) {
    std::cout << "{\"service\":" << JsonString(service.name()) << "}" << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace gatescope::client

int main(int argc, char** argv) {
  using namespace gatescope::client;
  if (argc < 2) {
    std::cerr << kUsage;
    return 1;
  }
  Args args;
  if (!ParseArgs(argc, argv, 2, args, {"rollout", "gates", "resonance", "plug-gates", "probabilities"})) {
    return 1;
  }
  // --image FILE is another way to name one input file.
  if (auto it = args.flags.find("image"); it != args.flags.end()) {
    args.positional.insert(args.positional.begin(), it->second);
  }
  const std::string cmd = argv[1];
  if (cmd == "predict") return Predict(args);
  if (cmd == "models") return Models(args);
  if (cmd == "health") return Health(args);
  if (cmd == "services") return Services(args);
  if (cmd == "explain") return Explain(args);
  std::cerr << kUsage;
  return 1;
}
