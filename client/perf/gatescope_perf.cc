// gatescope-perf: load generator for the gatescope.v1 Predict API, KServe v2 ModelInfer
// over gRPC, and KServe v2 inference over REST.
//
//   gatescope-perf --server ADDR --model NAME [--api gatescope|kserve [--streaming]|rest]
//       [--tls-ca FILE [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME]]
//       [--token-file FILE]
//       [--concurrency N | --concurrency-range A:B:S] [--request-rate R] [--connections 1]
//       [--warmup-ms 2000] [--window-ms 2000] [--stability 0.1] [--max-windows 10]
//       [--timeout-ms 30000] [--format json|csv] [--inputs auto|image|text]
//       [--batch-size 1] INPUT...
//
// Concurrency mode keeps N requests in flight (N threads, each sending its next request
// when the last one returns). Request-rate mode sends R requests/s on a fixed schedule
// (open loop, spread over --concurrency threads). After a warm-up, measurement windows
// repeat until the last three agree within ±stability on throughput and average latency
// (or --max-windows is reached); those three windows are reported together.
// INPUT files are sent in turn: encoded images (gatescope.v1 Predict image, or KServe v2
// ModelInfer input "input", BYTES [1]) or, for text models, UTF-8 texts (Predict text, or
// ModelInfer input "text", BYTES [1]). --inputs auto (the default) asks the server's
// gatescope.v1 GetModelMetadata for the model's task. The server-side split (average queue
// time per request and compute input/infer/output time per inference) comes from KServe
// ModelStatistics taken before and after the measurement. Every call (load and statistics)
// carries the bearer token of --token-file, over TLS when --tls-ca is given.
// --batch-size N (KServe over gRPC or REST; perf_analyzer's -b) sends N inputs per request,
// the next N files in turn, as one BYTES [N] input: the model sees N examples in one call,
// as from a client that batches itself. `throughput` stays requests/s; `inferences_per_s`
// is N times it. An N above the model's max_batch_size (from its metadata) stops the tool
// before any load, since the server would refuse every request.
// --streaming (with --api kserve) sends the same ModelInfer requests over ModelStreamInfer,
// as Triton's streaming clients do: each sending thread keeps one stream open and has one
// request on it at a time, so a request costs no call of its own. A reply with
// error_message counts as UNKNOWN (the stream carries no per-request code); a stream that
// breaks counts its status once and is opened again for the next request. A request on a
// stream has no deadline of its own: the stream's covers the whole measurement.
// --api rest sends the same inputs as POST /v2/models/NAME/infer to the REST API at --server
// (the server's --http_port; HTTPS with --tls-ca), with Triton's binary tensor extension for
// the input and the outputs, as Triton's HTTP clients send them: each sending thread keeps
// one HTTP/1.1 connection alive. An answer's HTTP status counts as the code the server
// mapped to it (rest_client.h). Metadata and statistics come from the REST API too.
// --connections N (gRPC APIs) opens N connections, each its own TCP connection, and sending
// thread t uses connection t mod N: one connection carries every call of the default
// single one, which on a many-core machine bounds the rate before the server does.
#include <CLI/CLI.hpp>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/cli_checks.h"
#include "client/connection.h"
#include "client/json_writer.h"
#include "client/perf/load_stats.h"
#include "client/perf/rest_client.h"
#include "gatescope/v1/inference.grpc.pb.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/api/kserve_bytes.h"

namespace gatescope::perf {
namespace {

using Clock = std::chrono::steady_clock;
using client::Connection;
using client::JsonNumber;
using client::JsonString;

// The REST API's address when --api rest comes without --server: the server's default
// --http_port on this machine.
constexpr char kDefaultRestServer[] = "127.0.0.1:8000";

struct Options {
  std::string model;
  bool kserve = false;
  bool streaming = false;  // with kserve: ModelStreamInfer, one stream per sending thread
  bool rest = false;       // KServe v2 inference over REST instead of gRPC
  bool text = false;  // inputs are texts (a text model), else encoded images
  int batch_size = 1;  // inputs per request (KServe only)
  int concurrency = 1;
  int connections = 1;  // gRPC connections the sending threads take in turn (gRPC APIs)
  double request_rate = 0;  // 0: concurrency mode
  int warmup_ms = 2000, window_ms = 2000, max_windows = 10, timeout_ms = 30000;
  double stability = 0.1;
};

// Server-side averages over a measurement, in microseconds (negative: unavailable).
struct ServerSplit {
  double queue_us = -1, compute_input_us = -1, compute_infer_us = -1, compute_output_us = -1;
};

// Where the load goes: --connections gRPC connections (each its own TCP connection; the
// first also carries the metadata and statistics calls), or with --api rest the REST API.
// Shared by every sending thread; nothing in it changes after it is opened.
struct Server {
  std::vector<Connection> grpc;
  std::optional<RestEndpoint> rest;
};

struct Result {
  int concurrency = 0;
  int connections = 1;
  int batch_size = 1;
  double request_rate = 0;
  bool stable = false;
  WindowStats stats;
  ServerSplit server;
};

// `message` from the JSON of a REST GET of `target` (protobuf's JSON mapping, which takes
// the API's numbers for 64-bit integers too); the call's or the parse's failure otherwise.
absl::Status GetJson(const RestEndpoint& rest, const std::string& target, int timeout_ms,
                     google::protobuf::Message* message) {
  RestClient client(rest);
  absl::StatusOr<RestReply> reply =
      client.Call(boost::beast::http::verb::get, target, "", {}, timeout_ms);
  const std::string url = std::string(rest.tls ? "https://" : "http://") + rest.authority + target;
  if (!reply.ok()) {
    return absl::Status(reply.status().code(),
                        "GET " + url + ": " + std::string(reply.status().message()));
  }
  if (reply->status != 200) {
    return absl::Status(StatusCodeOfHttp(reply->status), "GET " + url + ": " + reply->body);
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto parsed = google::protobuf::util::JsonStringToMessage(reply->body, message, options);
  if (!parsed.ok()) {
    return absl::InternalError("GET " + url + ": " + std::string(parsed.message()));
  }
  return absl::OkStatus();
}

// Cumulative statistics of the model from the KServe v2 API; nullopt if unavailable.
std::optional<inference::ModelStatistics> Statistics(const Options& opt, const Server& target) {
  if (target.rest) {
    inference::ModelStatisticsResponse resp;
    if (!GetJson(*target.rest, "/v2/models/" + opt.model + "/stats", 10000, &resp).ok() ||
        resp.model_stats_size() == 0) {
      return std::nullopt;
    }
    return resp.model_stats(0);
  }
  const Connection& server = target.grpc.front();
  auto stub = inference::GRPCInferenceService::NewStub(server.channel());
  const std::unique_ptr<grpc::ClientContext> ctx = server.NewContext(10000);
  inference::ModelStatisticsRequest req;
  req.set_name(opt.model);
  inference::ModelStatisticsResponse resp;
  if (!stub->ModelStatistics(ctx.get(), req, &resp).ok() || resp.model_stats_size() == 0) {
    return std::nullopt;
  }
  return resp.model_stats(0);
}

ServerSplit Split(const inference::ModelStatistics& a, const inference::ModelStatistics& b) {
  ServerSplit s;
  const auto& x = a.inference_stats();
  const auto& y = b.inference_stats();
  const double inferences = static_cast<double>(b.inference_count() - a.inference_count());
  const double queued = static_cast<double>(y.queue().count() - x.queue().count());
  if (queued > 0) s.queue_us = (y.queue().ns() - x.queue().ns()) / 1e3 / queued;
  if (inferences > 0) {
    s.compute_input_us = (y.compute_input().ns() - x.compute_input().ns()) / 1e3 / inferences;
    s.compute_infer_us = (y.compute_infer().ns() - x.compute_infer().ns()) / 1e3 / inferences;
    s.compute_output_us = (y.compute_output().ns() - x.compute_output().ns()) / 1e3 / inferences;
  }
  return s;
}

// Sends one request over the chosen API; returns its status. One per sending thread, which
// passes its index: over gRPC, sending thread t uses connection t mod --connections. `opt`
// and `server` must outlive it.
class Sender {
 public:
  Sender(const Options& opt, const Server& server, int thread_index) : opt_(opt) {
    if (server.rest) {
      rest_ = std::make_unique<RestClient>(*server.rest);
    } else {
      connection_ = &server.grpc[static_cast<size_t>(thread_index) % server.grpc.size()];
      gatescope_ = v1::Inference::NewStub(connection_->channel());
      kserve_ = inference::GRPCInferenceService::NewStub(connection_->channel());
    }
  }

  ~Sender() { CloseStream(); }

  // One request of opt.batch_size inputs (encoded images, or texts when opt.text):
  // inputs[first], inputs[first + 1], ..., wrapping around.
  grpc::Status Send(const std::vector<std::string>& inputs, size_t first) {
    if (rest_ != nullptr) return SendOverRest(inputs, first);
    const Connection& server = *connection_;
    if (!opt_.kserve) {
      const std::string& input = inputs[first % inputs.size()];
      const std::unique_ptr<grpc::ClientContext> ctx = server.NewContext(opt_.timeout_ms);
      v1::PredictRequest req;
      req.set_model_name(opt_.model);
      if (opt_.text) {
        req.set_text(input);
      } else {
        req.set_image(input);
      }
      v1::PredictResponse resp;
      return gatescope_->Predict(ctx.get(), req, &resp);
    }
    inference::ModelInferRequest req;
    req.set_model_name(opt_.model);
    auto* in = req.add_inputs();
    in->set_name(opt_.text ? "text" : "input");
    in->set_datatype("BYTES");
    in->add_shape(opt_.batch_size);
    req.add_raw_input_contents(RawBytes(inputs, first));
    if (opt_.streaming) return SendOnStream(req);
    const std::unique_ptr<grpc::ClientContext> ctx = server.NewContext(opt_.timeout_ms);
    inference::ModelInferResponse resp;
    return kserve_->ModelInfer(ctx.get(), req, &resp);
  }

 private:
  using Stream = grpc::ClientReaderWriter<inference::ModelInferRequest,
                                          inference::ModelStreamInferResponse>;

  // KServe's raw BYTES contents of the request's inputs.
  std::string RawBytes(const std::vector<std::string>& inputs, size_t first) const {
    std::string raw;
    for (int i = 0; i < opt_.batch_size; ++i) {
      AppendBytesElement(inputs[(first + i) % inputs.size()], raw);
    }
    return raw;
  }

  // POST /v2/models/NAME/infer: a JSON head naming one BYTES input of shape [batch_size]
  // whose elements (RawBytes) follow it, every output asked for as binary data.
  grpc::Status SendOverRest(const std::vector<std::string>& inputs, size_t first) {
    const std::string raw = RawBytes(inputs, first);
    std::string body = std::string("{\"inputs\":[{\"name\":\"") + (opt_.text ? "text" : "input") +
                       "\",\"shape\":[" + std::to_string(opt_.batch_size) +
                       "],\"datatype\":\"BYTES\",\"parameters\":"
                       "{\"binary_data_size\":" + std::to_string(raw.size()) +
                       "}}],\"parameters\":{\"binary_data_output\":true}}";
    const std::string head_length = std::to_string(body.size());
    body += raw;
    absl::StatusOr<RestReply> reply =
        rest_->Call(boost::beast::http::verb::post, "/v2/models/" + opt_.model + "/infer",
                    std::move(body),
                    {{"Inference-Header-Content-Length", head_length},
                     {"Content-Type", "application/octet-stream"}},
                    opt_.timeout_ms);
    if (!reply.ok()) {
      return grpc::Status(static_cast<grpc::StatusCode>(reply.status().code()),
                          std::string(reply.status().message()));
    }
    if (reply->status == 200) return grpc::Status::OK;
    return grpc::Status(static_cast<grpc::StatusCode>(StatusCodeOfHttp(reply->status)),
                        reply->body);
  }

  grpc::Status SendOnStream(const inference::ModelInferRequest& req) {
    if (stream_ == nullptr) {
      // A stream lasts the whole measurement: its deadline is the longest that can take.
      stream_context_ = connection_->NewContext(
          opt_.warmup_ms + opt_.window_ms * (opt_.max_windows + 1) + opt_.timeout_ms);
      stream_ = kserve_->ModelStreamInfer(stream_context_.get());
    }
    inference::ModelStreamInferResponse resp;
    if (stream_->Write(req) && stream_->Read(&resp)) {
      if (resp.error_message().empty()) return grpc::Status::OK;
      return grpc::Status(grpc::StatusCode::UNKNOWN, resp.error_message());
    }
    grpc::Status st = CloseStream();
    return st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended") : st;
  }

  // Ends the open stream, if any; its final status.
  grpc::Status CloseStream() {
    if (stream_ == nullptr) return grpc::Status::OK;
    stream_->WritesDone();
    grpc::Status st = stream_->Finish();
    stream_.reset();
    stream_context_.reset();
    return st;
  }

  const Options& opt_;
  const Connection* connection_ = nullptr;  // gRPC: this thread's, one of the Server's
  std::unique_ptr<RestClient> rest_;  // --api rest; else the stubs below
  std::unique_ptr<v1::Inference::Stub> gatescope_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
  std::unique_ptr<grpc::ClientContext> stream_context_;  // of stream_
  std::unique_ptr<Stream> stream_;  // --streaming: open from the first request on
};

// Runs one measurement: load at the given concurrency (or rate) until stable.
Result Measure(const Options& opt, const std::vector<std::string>& inputs, const Server& server) {
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<Sample> samples;
  const auto start = Clock::now();
  auto since_start_us = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - start).count();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < opt.concurrency; ++t) {
    threads.emplace_back([&, t] {
      Sender sender(opt, server, t);
      size_t next = static_cast<size_t>(t) * static_cast<size_t>(opt.batch_size);
      auto due = Clock::now();
      const auto interval = opt.request_rate > 0
                                ? std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(opt.concurrency /
                                                                    opt.request_rate))
                                : Clock::duration::zero();
      due += interval * t / std::max(1, opt.concurrency);
      while (!stop.load(std::memory_order_relaxed)) {
        // In rate mode latency counts from the scheduled send time, so a server that falls
        // behind is charged for the wait (no coordinated omission).
        auto sent = Clock::now();
        if (opt.request_rate > 0) {
          std::this_thread::sleep_until(due);
          sent = due;
          due += interval;
        }
        const grpc::Status st = sender.Send(inputs, next);
        next += static_cast<size_t>(opt.batch_size);
        const auto done = Clock::now();
        Sample sample{since_start_us(done),
                      std::chrono::duration_cast<std::chrono::microseconds>(done - sent).count(),
                      absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code()))};
        std::lock_guard<std::mutex> lock(mu);  // recorded at once so windows see it
        samples.push_back(std::move(sample));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(opt.warmup_ms));
  const auto stats_before = Statistics(opt, server);
  std::vector<WindowStats> windows;
  std::vector<int64_t> bounds{since_start_us(Clock::now())};
  Result result;
  result.concurrency = opt.concurrency;
  result.connections = server.rest ? opt.concurrency
                                    : std::min(opt.concurrency,
                                               static_cast<int>(server.grpc.size()));
  result.batch_size = opt.batch_size;
  result.request_rate = opt.request_rate;
  while (static_cast<int>(windows.size()) < opt.max_windows) {
    std::this_thread::sleep_for(std::chrono::milliseconds(opt.window_ms));
    bounds.push_back(since_start_us(Clock::now()));
    {
      std::lock_guard<std::mutex> lock(mu);
      windows.push_back(Summarise(samples, bounds[bounds.size() - 2], bounds.back()));
    }
    if (IsStable(windows, 3, opt.stability)) {
      result.stable = true;
      break;
    }
  }
  const auto stats_after = Statistics(opt, server);
  if (stats_before && stats_after) result.server = Split(*stats_before, *stats_after);
  stop = true;
  for (auto& t : threads) t.join();
  const size_t n = std::min<size_t>(3, windows.size());
  result.stats = Summarise(samples, bounds[bounds.size() - 1 - n], bounds.back());
  return result;
}

std::string ToJson(const Result& r) {
  const WindowStats& s = r.stats;
  std::string errors = "{";
  for (const auto& [code, n] : s.errors) {
    errors += (errors.size() > 1 ? "," : "") + JsonString(code) + ":" + std::to_string(n);
  }
  errors += "}";
  return "{\"concurrency\":" + std::to_string(r.concurrency) +
         ",\"connections\":" + std::to_string(r.connections) +
         ",\"request_rate\":" + JsonNumber(r.request_rate) +
         ",\"batch_size\":" + std::to_string(r.batch_size) +
         ",\"stable\":" + (r.stable ? "true" : "false") +
         ",\"throughput\":" + JsonNumber(s.throughput) +
         ",\"inferences_per_s\":" + JsonNumber(s.throughput * r.batch_size) + ",\"ok\":" + std::to_string(s.ok) +
         ",\"errors\":" + errors + ",\"avg_us\":" + JsonNumber(s.avg_us) +
         ",\"p50_us\":" + JsonNumber(s.p50_us) + ",\"p90_us\":" + JsonNumber(s.p90_us) +
         ",\"p95_us\":" + JsonNumber(s.p95_us) + ",\"p99_us\":" + JsonNumber(s.p99_us) +
         ",\"seconds\":" + JsonNumber(s.seconds) +
         ",\"server_queue_us\":" + JsonNumber(r.server.queue_us) +
         ",\"server_compute_input_us\":" + JsonNumber(r.server.compute_input_us) +
         ",\"server_compute_infer_us\":" + JsonNumber(r.server.compute_infer_us) +
         ",\"server_compute_output_us\":" + JsonNumber(r.server.compute_output_us) + "}";
}

std::string ToCsvRow(const Result& r) {
  const WindowStats& s = r.stats;
  int64_t errors = 0;
  for (const auto& [code, n] : s.errors) errors += n;
  std::ostringstream out;
  out << r.concurrency << "," << r.request_rate << "," << (r.stable ? 1 : 0) << ","
      << s.throughput << "," << s.ok << "," << errors << "," << s.avg_us << "," << s.p50_us
      << "," << s.p90_us << "," << s.p95_us << "," << s.p99_us << "," << r.server.queue_us
      << "," << r.server.compute_input_us << "," << r.server.compute_infer_us << ","
      << r.server.compute_output_us << "," << r.batch_size << ","
      << s.throughput * r.batch_size << "," << r.connections;
  return out.str();
}

// The flags (CLI11, as in gatescope-client: see client/main.cc for why) into `opt`, the
// concurrency levels to measure, and the rest.
struct Flags {
  Options opt;
  client::ConnectionOptions connection;
  std::vector<int> levels;  // from --concurrency-range; empty: just --concurrency
  std::string api = "gatescope";
  std::string format = "json";
  std::string input_kind = "auto";
  std::vector<std::string> inputs;
};

void AddFlags(CLI::App& app, Flags& f) {
  using client::IntegerIn;
  using client::NumberIn;
  client::AddConnectionFlags(app, f.connection);
  app.add_option("--model", f.opt.model, "model name")->required();
  app.add_option("--api", f.api,
                 "gatescope.v1 Predict, KServe v2 ModelInfer, or KServe v2 inference over REST "
                 "(rest: --server is HOST:PORT of the server's REST API, --http_port; default "
                 "127.0.0.1:8000)")
      ->check(CLI::IsMember({"gatescope", "kserve", "rest"}));
  app.add_flag("--streaming", f.opt.streaming,
               "with --api kserve: send over ModelStreamInfer, one stream per sending thread "
               "with one request on it at a time");
  CLI::Option* concurrency =
      app.add_option("--concurrency", f.opt.concurrency, "requests in flight (sending threads)")
          ->check(IntegerIn(1, 1024));
  app.add_option_function<std::vector<int>>(
         "--concurrency-range",
         [&f](const std::vector<int>& r) {
           if (r.size() < 2 || r.size() > 3 || r[1] < r[0]) {
             throw CLI::ValidationError("--concurrency-range", "wants START:END[:STEP], END >= START");
           }
           for (int c = r[0]; c <= r[1]; c += r.size() == 3 ? r[2] : 1) f.levels.push_back(c);
         },
         "measure at START, START+STEP, ... up to END (START:END[:STEP], each in [1, 1024])")
      ->delimiter(':')
      ->allow_extra_args(false)
      ->check(IntegerIn(1, 1024))
      ->excludes(concurrency);
  // One HTTP/2 connection carries every call of a channel, and its frames are read and
  // written by one thread at a time on either side: on a many-core machine one connection,
  // not the server, can bound the rate (serving clients are many, each with its own).
  app.add_option("--connections", f.opt.connections,
                 "gRPC connections (TCP) to the server; sending thread t uses connection t mod "
                 "this (no more than the concurrency are opened)")
      ->check(IntegerIn(1, 1024));
  app.add_option("--request-rate", f.opt.request_rate,
                 "requests/s on a fixed schedule over the threads (0: each thread sends its next "
                 "request when the last returns)")
      ->check(NumberIn(0, 1e6));
  app.add_option("--stability", f.opt.stability,
                 "the last 3 windows agree within this fraction on throughput and latency")
      ->check(NumberIn(0.001, 1));
  const struct {
    const char* name;
    int* value;
    const char* help;
    int lo, hi;
  } kIntegers[] = {
      {"--warmup-ms", &f.opt.warmup_ms, "load before measuring (ms)", 0, 600000},
      {"--window-ms", &f.opt.window_ms, "length of a measurement window (ms)", 1, 600000},
      {"--max-windows", &f.opt.max_windows, "windows before reporting unstable", 3, 1000},
      {"--timeout-ms", &f.opt.timeout_ms,
       "deadline of each request (ms); with --streaming, of each stream: the warm-up and "
       "every window, plus this",
       1, 3600000},
  };
  for (const auto& flag : kIntegers) {
    app.add_option(flag.name, *flag.value, flag.help)->check(IntegerIn(flag.lo, flag.hi));
  }
  app.add_option("--format", f.format, "a JSON line or a CSV row per concurrency level")
      ->check(CLI::IsMember({"json", "csv"}));
  app.add_option("--inputs", f.input_kind,
                 "what INPUT files are: encoded images, UTF-8 texts (text models), or auto: "
                 "from the model's task (gatescope.v1 GetModelMetadata)")
      ->check(CLI::IsMember({"auto", "image", "text"}));
  app.add_option("--batch-size", f.opt.batch_size,
                 "inputs per request, sent as one BYTES [N] input (--api kserve or rest; "
                 "perf_analyzer's -b): inferences_per_s is N times throughput (requests/s)")
      ->check(IntegerIn(1, 1024));
  app.add_option("INPUT", f.inputs, "encoded images or texts, sent in turn")
      ->required()
      ->default_str("");
}

// The contents of every input; nullopt (after a message on stderr) if one cannot be read.
std::optional<std::vector<std::string>> ReadInputs(const std::vector<std::string>& paths) {
  std::vector<std::string> inputs;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "gatescope-perf: cannot read " << path << "\n";
      return std::nullopt;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    inputs.push_back(ss.str());
  }
  return inputs;
}

// The model's gatescope.v1 metadata (GetModelMetadata, over REST GET
// /v2/models/NAME/gatescope): its task says whether it reads text, its config the largest
// batch the server forms. The failed call's status otherwise.
absl::StatusOr<v1::ModelMetadataResponse> ModelMetadata(const Options& opt,
                                                        const Server& target) {
  if (target.rest) {
    v1::ModelMetadataResponse resp;
    const absl::Status st =
        GetJson(*target.rest, "/v2/models/" + opt.model + "/gatescope", opt.timeout_ms, &resp);
    if (!st.ok()) {
      return absl::Status(st.code(), "model metadata of " + opt.model + ": " +
                                         std::string(st.message()));
    }
    return resp;
  }
  const Connection& server = target.grpc.front();
  auto stub = v1::Inference::NewStub(server.channel());
  const std::unique_ptr<grpc::ClientContext> ctx = server.NewContext(opt.timeout_ms);
  v1::ModelMetadataRequest req;
  req.set_model_name(opt.model);
  v1::ModelMetadataResponse resp;
  const grpc::Status st = stub->GetModelMetadata(ctx.get(), req, &resp);
  if (!st.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                        "model metadata of " + opt.model + ": " + st.error_message());
  }
  return resp;
}

int Main(int argc, char** argv) {
  // As in the server: Debian's Abseil (without NDEBUG) would also update a lock-order graph
  // on every Mutex acquisition, gRPC's own included (1.7 % of this tool's CPU under load,
  // perf record), load the generator does not need to make.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"gatescope-perf: latency and throughput of a model under load", "gatescope-perf"};
  app.option_defaults()->always_capture_default();
  app.footer("Exit status: 0 every request succeeded; 2 a usage error (reason on stderr), an "
             "input that cannot be read, or failed requests.");
  Flags f;
  AddFlags(app, f);
  if (std::optional<int> exit = client::ParseCommandLine(app, argc, argv)) return *exit;
  if (f.opt.streaming && f.api != "kserve") {
    return client::UsageError(app, "--streaming needs --api kserve");
  }
  if (f.opt.connections > 1 && f.api == "rest") {
    return client::UsageError(app, "--connections is for the gRPC APIs (over REST each sending "
                                   "thread has a connection of its own)");
  }
  if (f.opt.batch_size > 1 && f.api == "gatescope") {
    return client::UsageError(app, "--batch-size above 1 needs --api kserve or rest "
                                   "(gatescope.v1 Predict takes one input)");
  }
  Options& opt = f.opt;
  opt.kserve = f.api == "kserve";
  opt.rest = f.api == "rest";
  Server server;
  if (opt.rest) {
    if (app.get_option("--server")->count() == 0) f.connection.server = kDefaultRestServer;
    absl::StatusOr<RestEndpoint> rest = OpenRestEndpoint(f.connection);
    if (!rest.ok()) return client::UsageError(app, std::string(rest.status().message()));
    server.rest = *std::move(rest);
  } else {
    for (int i = 0; i < opt.connections; ++i) {
      absl::StatusOr<Connection> grpc = client::OpenConnection(f.connection);
      if (!grpc.ok()) return client::UsageError(app, std::string(grpc.status().message()));
      server.grpc.push_back(*std::move(grpc));
    }
  }
  // The metadata decides what the inputs are (--inputs auto) and bounds --batch-size.
  if (f.input_kind == "auto" || opt.batch_size > 1) {
    const absl::StatusOr<v1::ModelMetadataResponse> meta = ModelMetadata(opt, server);
    if (!meta.ok()) {
      std::cerr << "gatescope-perf: " << meta.status().message()
                << (f.input_kind == "auto" ? " (--inputs image|text skips this call)" : "")
                << "\n";
      return 2;
    }
    const int max_batch = meta->config().max_batch_size();
    if (max_batch > 0 && opt.batch_size > max_batch) {
      std::cerr << "gatescope-perf: --batch-size " << opt.batch_size << " exceeds "
                << opt.model << "'s max_batch_size " << max_batch
                << ": the server would refuse every request\n";
      return 2;
    }
    if (f.input_kind == "auto") opt.text = meta->config().task() == "text_classification";
  }
  if (f.input_kind != "auto") opt.text = f.input_kind == "text";
  if (f.levels.empty()) f.levels.push_back(opt.concurrency);
  const std::optional<std::vector<std::string>> inputs = ReadInputs(f.inputs);
  if (!inputs) return 2;
  if (f.format == "csv") {
    std::cout << "concurrency,request_rate,stable,throughput,ok,errors,avg_us,p50_us,p90_us,"
                 "p95_us,p99_us,server_queue_us,server_compute_input_us,"
                 "server_compute_infer_us,server_compute_output_us,batch_size,"
                 "inferences_per_s,connections\n";
  }
  bool all_ok = true;
  for (int c : f.levels) {
    opt.concurrency = c;
    const Result r = Measure(opt, *inputs, server);
    all_ok &= r.stats.errors.empty() && r.stats.ok > 0;
    std::cout << (f.format == "csv" ? ToCsvRow(r) : ToJson(r)) << std::endl;
  }
  return all_ok ? 0 : 2;
}

}  // namespace
}  // namespace gatescope::perf

int main(int argc, char** argv) { return gatescope::perf::Main(argc, argv); }
