#include "server/frontend/http/rest_api.h"

#include <google/protobuf/util/json_util.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/frontend/http/infer_json.h"
#include "server/frontend/http/static_site.h"

namespace gatescope {
namespace {

namespace kv = ::inference;
using json = nlohmann::json;

HttpResponse Answer(http::status status, unsigned version, std::string body,
                    const char* content_type = "application/json") {
  HttpResponse r{status, version};
  r.set(http::field::content_type, content_type);
  r.body() = std::move(body);
  return r;
}

HttpResponse Error(const absl::Status& status, unsigned version) {
  json body = {{"error", std::string(status.message())}};
  HttpResponse r = Answer(HttpStatusOf(status.code()), version,
                          body.dump(-1, ' ', false, json::error_handler_t::replace));
  if (status.code() == absl::StatusCode::kUnauthenticated) {
    r.set(http::field::www_authenticate, "Bearer realm=\"gatescope\"");
  }
  return r;
}

// Keys whose values protobuf's JSON mapping prints as strings (64-bit integers) but the
// protocol's JSON has as numbers.
bool IsIntegerKey(const std::string& key) {
  static const char* const kKeys[] = {
      "shape", "dims", "count", "ns", "inference_count", "execution_count", "last_inference",
      "batch_size", "max_queue_delay_microseconds", "default_timeout_microseconds",
      "priority_levels", "default_priority_level"};
  for (const char* k : kKeys) {
    if (key == k) return true;
  }
  return false;
}

void NumbersForIntegers(json& value, bool integer_key) {
  if (value.is_string() && integer_key) {
    int64_t i;
    uint64_t u;
    const std::string& s = value.get_ref<const std::string&>();
    if (absl::SimpleAtoi(s, &i)) value = i;
    else if (absl::SimpleAtoi(s, &u)) value = u;
  } else if (value.is_array()) {
    for (json& v : value) NumbersForIntegers(v, integer_key);
  } else if (value.is_object()) {
    for (auto& [key, v] : value.items()) NumbersForIntegers(v, IsIntegerKey(key));
  }
}

// A message as the protocol's JSON: proto field names, 64-bit integers as numbers.
// INTERNAL if protobuf cannot print it (e.g. a string field that is not UTF-8).
absl::StatusOr<json> ToJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;  // zero counts are answers too
  const auto printed = google::protobuf::util::MessageToJsonString(message, &text, options);
  json value = printed.ok() ? json::parse(text, nullptr, /*allow_exceptions=*/false)
                            : json(json::value_t::discarded);
  if (value.is_discarded()) {
    return absl::InternalError(absl::StrCat("cannot write ", message.GetTypeName(), " as JSON"));
  }
  NumbersForIntegers(value, false);
  return value;
}

HttpResponse JsonAnswer(const json& value, unsigned version) {
  return Answer(http::status::ok, version,
                value.dump(-1, ' ', false, json::error_handler_t::replace));
}

HttpResponse JsonAnswer(const absl::StatusOr<json>& value, unsigned version) {
  return value.ok() ? JsonAnswer(*value, version) : Error(value.status(), version);
}

HttpResponse JsonAnswer(const google::protobuf::Message& message, unsigned version) {
  return JsonAnswer(ToJson(message), version);
}

// A path split into its segments, without the query string.
std::vector<std::string> Segments(absl::string_view target) {
  const size_t query = target.find('?');
  if (query != absl::string_view::npos) target = target.substr(0, query);
  std::vector<std::string> out;
  for (absl::string_view s : absl::StrSplit(target, '/', absl::SkipEmpty())) out.emplace_back(s);
  return out;
}

// /v2/models/M[/versions/V]/<rest...>: the model, version and what follows.
struct ModelPath {
  std::string name, version;
  std::vector<std::string> rest;
};

std::optional<ModelPath> ParseModelPath(const std::vector<std::string>& s) {
  if (s.size() < 3 || s[0] != "v2" || s[1] != "models") return std::nullopt;
  ModelPath p;
  p.name = s[2];
  size_t i = 3;
  if (s.size() >= 5 && s[3] == "versions") {
    p.version = s[4];
    i = 5;
  }
  p.rest.assign(s.begin() + static_cast<long>(i), s.end());
  return p;
}

absl::StatusOr<json> BodyObject(const HttpRequest& request) {
  if (request.body().empty()) return json::object();
  json value = json::parse(request.body(), nullptr, false);
  if (value.is_discarded() || !value.is_object()) {
    return absl::InvalidArgumentError("the body must be a JSON object");
  }
  return value;
}

// The "parameters" object of a repository call's body, as ModelRepositoryParameters.
absl::Status RepositoryParameters(const json& body,
                                  google::protobuf::Map<std::string, kv::ModelRepositoryParameter>* out) {
  auto it = body.find("parameters");
  if (it == body.end()) return absl::OkStatus();
  if (!it->is_object()) return absl::InvalidArgumentError("parameters must be an object");
  for (const auto& [key, v] : it->items()) {
    kv::ModelRepositoryParameter p;
    if (v.is_boolean()) p.set_bool_param(v.get<bool>());
    else if (v.is_number_integer()) p.set_int64_param(v.get<int64_t>());
    else if (v.is_string()) p.set_string_param(v.get<std::string>());
    else return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' has a bad type"));
    (*out)[key] = std::move(p);
  }
  return absl::OkStatus();
}

// Builds an answer and sends it: on `pool` when there is one (the caller is a model's
// worker, which should not spend its time writing JSON), else on the calling thread. An
// exception while building answers 500.
void Deliver(PreparationPool* pool, const HttpRespond& respond, unsigned version,
             std::function<HttpResponse()> build) {
  auto task = [respond, version, build = std::move(build)] {
    try {
      respond(build());
    } catch (const std::exception& e) {
      respond(Error(absl::InternalError(absl::StrCat("writing the answer failed: ", e.what())),
                    version));
    }
  };
  if (pool == nullptr || !pool->Submit(task).ok()) task();
}

// The access category of a route, from its path alone (unknown routes: metadata).
Access CategoryOf(const std::vector<std::string>& s) {
  if (s.size() >= 2 && s[0] == "v2" && s[1] == "health") return Access::kHealth;
  if (s.size() == 5 && s[0] == "v2" && s[1] == "repository" && s[2] == "models") {
    return Access::kModelControl;
  }
  if (std::optional<ModelPath> p = ParseModelPath(s); p && p->rest.size() == 1) {
    const std::string& what = p->rest[0];
    if (what == "ready") return Access::kHealth;
    if (what == "infer" || what == "predict" || what == "explain") return Access::kInference;
  }
  return Access::kMetadata;
}

// A gatescope.v1 call from a JSON body in protobuf's mapping (model and version from the
// path), answered with the response message's JSON once `run` finishes it.
template <typename Request, typename Response, typename Run>
void ServeV1(const std::string& body, const ModelPath& path, unsigned version,
             const HttpRespond& respond, PreparationPool* pool, Run run) {
  auto call = std::make_shared<std::pair<Request, Response>>();
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      body.empty() ? std::string("{}") : body, &call->first,
      google::protobuf::util::JsonParseOptions());
  if (!parsed.ok()) {
    return respond(Error(absl::InvalidArgumentError(absl::StrCat(
                             "the body is not a ", Request::descriptor()->full_name(), ": ",
                             parsed.message().as_string())),
                         version));
  }
  call->first.set_model_name(path.name);
  call->first.set_model_version(path.version);
  run(&call->first, &call->second, [call, respond, version, pool](absl::Status st) {
    if (!st.ok()) return respond(Error(st, version));
    Deliver(pool, respond, version, [call, version] { return JsonAnswer(call->second, version); });
  });
}

}  // namespace

http::status HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return http::status::ok;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return http::status::bad_request;
    case absl::StatusCode::kUnauthenticated: return http::status::unauthorized;
    case absl::StatusCode::kPermissionDenied: return http::status::forbidden;
    case absl::StatusCode::kNotFound: return http::status::not_found;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return http::status::conflict;
    case absl::StatusCode::kResourceExhausted: return http::status::too_many_requests;
    case absl::StatusCode::kUnimplemented: return http::status::not_implemented;
    case absl::StatusCode::kUnavailable: return http::status::service_unavailable;
    case absl::StatusCode::kDeadlineExceeded: return http::status::gateway_timeout;
    default: return http::status::internal_server_error;
  }
}

void RestApi::Handle(HttpRequest request, HttpRespond respond) const {
  if (pool_ == nullptr || request.method() != http::verb::post ||
      request.body().size() < kInlineBodyBytes) {
    return RouteSafely(std::move(request), std::move(respond));
  }
  // A large body: parse it off the HTTP thread.
  const unsigned version = request.version();
  auto owned = std::make_shared<HttpRequest>(std::move(request));
  absl::Status queued =
      pool_->Submit([this, owned, respond] { RouteSafely(std::move(*owned), respond); });
  if (!queued.ok()) respond(Error(queued, version));
}

std::optional<HttpResponse> RestApi::CheckHead(const HttpRequest& head) const {
  if (access_ == nullptr) return std::nullopt;
  // The viewer's files carry no model data: open, like a login page; its API calls are not.
  // Only GET and HEAD, which carry no body: a token-less caller never makes the server
  // hold a body.
  const bool reads = head.method() == http::verb::get || head.method() == http::verb::head;
  if (viewer_ && reads &&
      ViewerSite().Owns(std::string_view(head.target().data(), head.target().size()))) {
    return std::nullopt;
  }
  const auto header = head[http::field::authorization];
  const absl::Status st = access_->Check(
      absl::string_view(header.data(), header.size()),
      CategoryOf(Segments(absl::string_view(head.target().data(), head.target().size()))));
  if (st.ok()) return std::nullopt;
  return Error(st, head.version());
}

void RestApi::RouteSafely(HttpRequest request, const HttpRespond& respond) const {
  const unsigned version = request.version();
  try {
    Route(std::move(request), respond);
  } catch (const std::exception& e) {  // e.g. out of memory in a huge JSON body
    respond(Error(absl::InternalError(e.what()), version));  // ignored if already answered
  }
}

void RestApi::Route(HttpRequest request, const HttpRespond& respond) const {
  const unsigned version = request.version();
  if (const StaticSite& viewer = ViewerSite();
      viewer_ && viewer.Owns(std::string_view(request.target().data(), request.target().size()))) {
    return respond(viewer.Serve(request));
  }
  if (std::optional<HttpResponse> refused = CheckHead(request)) return respond(*std::move(refused));
  const std::vector<std::string> s =
      Segments(absl::string_view(request.target().data(), request.target().size()));
  const http::verb verb = request.method();
  auto wrong_method = [&](const char* allow) {
    HttpResponse r = Error(absl::UnimplementedError(absl::StrCat("use ", allow)), version);
    r.result(http::status::method_not_allowed);
    r.set(http::field::allow, allow);
    respond(std::move(r));
  };
  auto ready_answer = [&](bool ready) {
    // The protocol: 200 when ready, a 4xx status when not (400, as Triton).
    respond(Answer(ready ? http::status::ok : http::status::bad_request, version, "",
                   "text/plain"));
  };

  // /v2/health/{live,ready}
  if (s.size() == 3 && s[0] == "v2" && s[1] == "health" && (s[2] == "live" || s[2] == "ready")) {
    if (verb != http::verb::get) return wrong_method("GET");
    return ready_answer(s[2] == "live" ? true : kserve_->ServerReady());
  }
  // /v2
  if (s.size() == 1 && s[0] == "v2") {
    if (verb != http::verb::get) return wrong_method("GET");
    kv::ServerMetadataResponse metadata;
    kserve_->ServerMetadata(&metadata);
    return respond(JsonAnswer(metadata, version));
  }
  // /v2/models/stats (every model)
  if (s.size() == 3 && s[0] == "v2" && s[1] == "models" && s[2] == "stats") {
    if (verb != http::verb::get) return wrong_method("GET");
    kv::ModelStatisticsResponse stats;
    absl::Status st = kserve_->ModelStatistics(kv::ModelStatisticsRequest(), &stats);
    if (!st.ok()) return respond(Error(st, version));
    return respond(JsonAnswer(stats, version));
  }
  // /v2/repository/...
  if (s.size() >= 3 && s[0] == "v2" && s[1] == "repository") {
    if (verb != http::verb::post) return wrong_method("POST");
    absl::StatusOr<json> body = BodyObject(request);
    if (!body.ok()) return respond(Error(body.status(), version));
    if (s.size() == 3 && s[2] == "index") {
      kv::RepositoryIndexRequest index;
      if (auto it = body->find("ready"); it != body->end() && it->is_boolean()) {
        index.set_ready(it->get<bool>());
      }
      kv::RepositoryIndexResponse models;
      kserve_->RepositoryIndex(index, &models);
      json list = json::array();
      for (const auto& m : models.models()) {
        absl::StatusOr<json> entry = ToJson(m);
        if (!entry.ok()) return respond(Error(entry.status(), version));
        list.push_back(*std::move(entry));
      }
      return respond(JsonAnswer(list, version));
    }
    if (s.size() == 5 && s[2] == "models" && (s[4] == "load" || s[4] == "unload")) {
      auto done = [respond, version](absl::Status st) {
        respond(st.ok() ? Answer(http::status::ok, version, "", "text/plain") : Error(st, version));
      };
      if (s[4] == "load") {
        kv::RepositoryModelLoadRequest load;
        load.set_model_name(s[3]);
        if (absl::Status st = RepositoryParameters(*body, load.mutable_parameters()); !st.ok()) {
          return respond(Error(st, version));
        }
        return kserve_->RepositoryModelLoad(load, done);
      }
      kv::RepositoryModelUnloadRequest unload;
      unload.set_model_name(s[3]);
      if (absl::Status st = RepositoryParameters(*body, unload.mutable_parameters()); !st.ok()) {
        return respond(Error(st, version));
      }
      return kserve_->RepositoryModelUnload(unload, done);
    }
  }
  // /v2/models/M[/versions/V][/...]
  if (std::optional<ModelPath> p = ParseModelPath(s)) {
    const std::string what = p->rest.size() == 1 ? p->rest[0] : p->rest.empty() ? "" : "?";
    if (what.empty() || what == "ready" || what == "config" || what == "stats") {
      if (verb != http::verb::get) return wrong_method("GET");
      if (what == "ready") return ready_answer(kserve_->ModelReady(p->name, p->version));
      absl::Status st;
      absl::StatusOr<json> value;
      if (what.empty()) {
        kv::ModelMetadataRequest in;
        in.set_name(p->name);
        in.set_version(p->version);
        kv::ModelMetadataResponse out;
        st = kserve_->ModelMetadata(in, &out);
        if (st.ok()) value = ToJson(out);
      } else if (what == "config") {
        kv::ModelConfigRequest in;
        in.set_name(p->name);
        in.set_version(p->version);
        kv::ModelConfigResponse out;
        st = kserve_->ModelConfig(in, &out);
        if (st.ok()) value = ToJson(out.config());  // Triton's REST: the configuration itself
      } else {
        kv::ModelStatisticsRequest in;
        in.set_name(p->name);
        in.set_version(p->version);
        kv::ModelStatisticsResponse out;
        st = kserve_->ModelStatistics(in, &out);
        if (st.ok()) value = ToJson(out);
      }
      if (!st.ok()) return respond(Error(st, version));
      return respond(JsonAnswer(value, version));
    }
    if (what == "infer") {
      if (verb != http::verb::post) return wrong_method("POST");
      std::optional<size_t> json_length;
      const auto length = request["Inference-Header-Content-Length"];
      if (!length.empty()) {
        size_t n;
        if (!absl::SimpleAtoi(absl::string_view(length.data(), length.size()), &n)) {
          return respond(Error(absl::InvalidArgumentError(
                                   "Inference-Header-Content-Length must be a byte count"),
                               version));
        }
        json_length = n;
      }
      absl::StatusOr<ParsedInfer> parsed = ParseInferRequest(request.body(), json_length);
      if (!parsed.ok()) return respond(Error(parsed.status(), version));
      auto call = std::make_shared<std::pair<ParsedInfer, kv::ModelInferResponse>>();
      call->first = *std::move(parsed);
      call->first.request.set_model_name(p->name);
      call->first.request.set_model_version(p->version);
      PreparationPool* pool = pool_;
      return kserve_->ModelInfer(
          &call->first.request, &call->second, CallContext(),
          [call, respond, version, pool](absl::Status st) {
            if (!st.ok()) return respond(Error(st, version));
            Deliver(pool, respond, version, [call, version] {
              InferBody body = WriteInferResponse(call->second, call->first.binary);
              HttpResponse r = Answer(http::status::ok, version, std::move(body.body),
                                      body.json_length ? "application/octet-stream"
                                                       : "application/json");
              if (body.json_length) {
                r.set("Inference-Header-Content-Length", std::to_string(*body.json_length));
              }
              return r;
            });
          });
    }
    if (what == "explain") {
      if (verb != http::verb::post) return wrong_method("POST");
      return ServeV1<v1::ExplainRequest, v1::ExplainResponse>(
          request.body(), *p, version, respond, pool_,
          [this](const v1::ExplainRequest* in, v1::ExplainResponse* out, FinishCall done) {
            v1_->Explain(in, out, CallContext(), std::move(done));
          });
    }
    if (what == "predict") {
      if (verb != http::verb::post) return wrong_method("POST");
      return ServeV1<v1::PredictRequest, v1::PredictResponse>(
          request.body(), *p, version, respond, pool_,
          [this](const v1::PredictRequest* in, v1::PredictResponse* out, FinishCall done) {
            v1_->Predict(in, out, CallContext(), std::move(done));
          });
    }
    if (what == "gatescope") {
      if (verb != http::verb::get) return wrong_method("GET");
      v1::ModelMetadataRequest in;
      in.set_model_name(p->name);
      in.set_model_version(p->version);
      v1::ModelMetadataResponse out;
      if (absl::Status st = v1_->GetModelMetadata(in, &out); !st.ok()) {
        return respond(Error(st, version));
      }
      return respond(JsonAnswer(out, version));
    }
  }
  respond(Error(absl::NotFoundError(absl::StrCat("no route for ", std::string(request.target()))),
                version));
}

}  // namespace gatescope
