// gatescope-client: command-line client of the gatescope.v1 API.
//
//   gatescope-client predict --server ADDR --model NAME [--version V] [--top-k K]
//       [--timeout-ms MS] [--raw-shape C,H,W --raw-dtype uint8|float32] FILE...
//   gatescope-client models --server ADDR
//   gatescope-client health --server ADDR [--service NAME]
//   gatescope-client services --server ADDR     (lists services via server reflection)
//   gatescope-client explain --server ADDR --model NAME [--rollout] [--gates]
//       [--layers 0,2] [--head-fusion mean|max|min] [--signed clamp|abs|raw]
//       [--discard-ratio R] [--start-layer L] --out DIR FILE...
//     writes DIR/<file name>.rollout.png (rollout over the image, with --rollout) and
//     DIR/<file name>.json (classes, rollout grid, gates per layer, attention layers);
//     prints one JSON line per input naming what it wrote.
//
// predict prints one JSON object per input, in order:
//   {"file":..., "label":..., "score":..., "topk":[{"label":..., "score":...}, ...]}
// or {"file":..., "error":{"code":"INVALID_ARGUMENT", "message":...}}; exits 2 if any failed.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "client/cli_args.h"
#include "client/json_writer.h"
#include "client/status_names.h"
#include "gatescope/v1/inference.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace gatescope::client {
namespace {

using ::gatescope::v1::Inference;

const char kUsage[] =
    "usage: gatescope-client predict --server ADDR --model NAME [--version V] [--top-k K]\n"
    "           [--timeout-ms MS] [--raw-shape C,H,W --raw-dtype uint8|float32] FILE...\n"
    "       gatescope-client models --server ADDR\n"
    "       gatescope-client health --server ADDR [--service NAME]\n"
    "       gatescope-client services --server ADDR\n"
    "       gatescope-client explain --server ADDR --model NAME [--rollout] [--gates]\n"
    "           [--layers 0,2] [--head-fusion mean|max|min] [--signed clamp|abs|raw]\n"
    "           [--discard-ratio R] [--start-layer L] --out DIR FILE...\n";

bool ReadFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

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
  auto stub = Connect(args);
  int failures = 0;
  for (const std::string& file : args.positional) {
    v1::PredictRequest request;
    request.set_model_name(model);
    request.set_model_version(get("version", ""));
    request.set_top_k(top_k);
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

// JSON array of a FLOAT32 tensor, nested by its shape.
std::string TensorJson(const v1::Tensor& t) {
  const float* data = reinterpret_cast<const float*>(t.data().data());
  const size_t count = t.data().size() / sizeof(float);
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  size_t pos = 0;
  std::function<std::string(size_t)> nest = [&](size_t dim) -> std::string {
    std::string out = "[";
    for (int64_t i = 0; i < shape[dim]; ++i) {
      if (i) out += ",";
      if (dim + 1 == shape.size()) {
        out += pos < count ? JsonNumber(data[pos]) : "null";
        ++pos;
      } else {
        out += nest(dim + 1);
      }
    }
    return out + "]";
  };
  return shape.empty() ? "[]" : nest(0);
}

int Explain(const Args& args) {
  const std::string model = args.Get("model", ""), out_dir = args.Get("out", "");
  if (model.empty() || out_dir.empty() || args.positional.empty()) {
    std::cerr << kUsage;
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir)) {
    std::cout << ErrorLine(out_dir, "CLIENT", "cannot create the output directory") << std::endl;
    return 1;
  }
  const int timeout_ms = std::atoi(args.Get("timeout-ms", "60000").c_str());
  auto stub = Connect(args);
  int failures = 0;
  std::set<std::string> used_stems;
  for (const std::string& file : args.positional) {
    v1::ExplainRequest req;
    req.set_model_name(model);
    req.set_model_version(args.Get("version", ""));
    req.set_rollout(args.Get("rollout", "") == "true");
    req.set_gates(args.Get("gates", "") == "true");
    req.set_heatmap_png(req.rollout());
    std::stringstream layers(args.Get("layers", ""));
    for (std::string l; std::getline(layers, l, ',');) {
      if (!l.empty()) req.add_attention_layers(std::atoi(l.c_str()));
    }
    auto* ro = req.mutable_rollout_options();
    ro->set_head_fusion(args.Get("head-fusion", ""));
    ro->set_signed_maps(args.Get("signed", ""));
    ro->set_discard_ratio(std::atof(args.Get("discard-ratio", "0").c_str()));
    ro->set_start_layer(std::atoi(args.Get("start-layer", "0").c_str()));
    std::string bytes;
    if (!ReadFile(file, bytes)) {
      std::cout << ErrorLine(file, "CLIENT", "cannot read file") << std::endl;
      ++failures;
      continue;
    }
    req.set_image(std::move(bytes));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    v1::ExplainResponse resp;
    const grpc::Status st = stub->Explain(&ctx, req, &resp);
    if (!st.ok()) {
      std::cout << ErrorLine(file, CodeName(st.error_code()), st.error_message()) << std::endl;
      ++failures;
      continue;
    }
    // Named after the whole file name (extension kept); a repeated name gets a counter so
    // no input's results overwrite another's.
    const std::string base = std::filesystem::path(file).filename().string();
    std::string stem = (std::filesystem::path(out_dir) / base).string();
    for (int n = 2; used_stems.count(stem); ++n) {
      stem = (std::filesystem::path(out_dir) / (base + "." + std::to_string(n))).string();
    }
    used_stems.insert(stem);
    std::string json = "{\"file\":" + JsonString(file) + ",\"classes\":[";
    for (int i = 0; i < resp.classes_size(); ++i) {
      json += (i ? "," : "") + std::string("{\"label\":") + JsonString(resp.classes(i).label()) +
              ",\"score\":" + JsonNumber(resp.classes(i).probability()) + "}";
    }
    json += "]";
    if (resp.has_rollout()) json += ",\"rollout\":" + TensorJson(resp.rollout());
    json += ",\"gates\":[";
    for (int i = 0; i < resp.gates_size(); ++i) json += (i ? "," : "") + TensorJson(resp.gates(i));
    json += "],\"attention\":[";
    for (int i = 0; i < resp.attention_size(); ++i) {
      json += (i ? "," : "") + TensorJson(resp.attention(i));
    }
    json += "]}";
    bool written = static_cast<bool>(std::ofstream(stem + ".json") << json << "\n");
    std::string line = "{\"file\":" + JsonString(file) + ",\"json\":" + JsonString(stem + ".json");
    if (!resp.rollout_png().empty()) {
      written &= static_cast<bool>(std::ofstream(stem + ".rollout.png", std::ios::binary)
                                   << resp.rollout_png());
      line += ",\"png\":" + JsonString(stem + ".rollout.png");
    }
    if (!written) {
      std::cout << ErrorLine(file, "CLIENT", "cannot write results under " + out_dir)
                << std::endl;
      ++failures;
      continue;
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
  if (!ParseArgs(argc, argv, 2, args, {"rollout", "gates"})) return 1;
  const std::string cmd = argv[1];
  if (cmd == "predict") return Predict(args);
  if (cmd == "models") return Models(args);
  if (cmd == "health") return Health(args);
  if (cmd == "services") return Services(args);
  if (cmd == "explain") return Explain(args);
  std::cerr << kUsage;
  return 1;
}
