#include "server/frontend/grpc/kserve_service.h"

#include <map>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "server/frontend/grpc/explain_call.h"
#include "server/frontend/grpc/kserve_codec.h"
#include "server/frontend/grpc/kserve_outputs.h"
#include "server/frontend/grpc/model_call.h"
#include "server/frontend/grpc/status_mapping.h"

namespace gatescope {
namespace {

namespace kv = ::inference;
constexpr char kInputName[] = "input";
constexpr char kPlatform[] = "pytorch_libtorch";

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& st) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(st));
  return reactor;
}

void SetDuration(kv::StatisticDuration* d, uint64_t count, double seconds) {
  d->set_count(count);
  d->set_ns(static_cast<uint64_t>(seconds * 1e9));
}

// KServe request parameters that turn ModelInfer into an explanation (gatescope's
// extension; docs/explain.md): "explain" = comma-separated kinds among rollout, gates,
// resonance, plug_gates; "explain_attention_layers" = comma-separated layers for full maps, optionally
// restricted by "explain_attention_heads" and "explain_attention_queries" (token indices);
// "rollout_head_fusion", "rollout_signed_maps" (strings), "rollout_discard_ratio" (double),
// "rollout_start_layer" (int64). nullopt when the request asks for no explanation.
absl::StatusOr<std::optional<ExplainOptions>> ParseExplainParameters(
    const google::protobuf::Map<std::string, kv::InferParameter>& params) {
  auto it = params.find("explain");
  auto layers = params.find("explain_attention_layers");
  if (it == params.end() && layers == params.end()) return std::optional<ExplainOptions>();
  ExplainOptions o;
  if (it != params.end()) {
    for (absl::string_view kind : absl::StrSplit(it->second.string_param(), ',',
                                                 absl::SkipWhitespace())) {
      kind = absl::StripAsciiWhitespace(kind);
      if (kind == "rollout") {
        o.rollout = true;
      } else if (kind == "gates") {
        o.gates = true;
      } else if (kind == "resonance") {
        o.resonance = true;
      } else if (kind == "plug_gates") {
        o.plug_gates = true;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "explain parameter: unknown kind '", std::string(kind),
            "' (rollout, gates, resonance, plug_gates)"));
      }
    }
  }
  for (auto [name, list] : {std::pair{"explain_attention_layers", &o.attention_layers},
                            std::pair{"explain_attention_heads", &o.attention_heads},
                            std::pair{"explain_attention_queries", &o.attention_queries}}) {
    auto p = params.find(name);
    if (p == params.end()) continue;
    for (absl::string_view item : absl::StrSplit(p->second.string_param(), ',',
                                                 absl::SkipWhitespace())) {
      int value = 0;
      if (!absl::SimpleAtoi(item, &value)) {
        return absl::InvalidArgumentError(absl::StrCat(name, " must be integers"));
      }
      list->push_back(value);
    }
  }
  if (auto p = params.find("rollout_head_fusion"); p != params.end()) {
    o.rollout_options.head_fusion = p->second.string_param();
  }
  if (auto p = params.find("rollout_signed_maps"); p != params.end()) {
    o.rollout_options.signed_maps = p->second.string_param();
  }
  if (auto p = params.find("rollout_discard_ratio"); p != params.end()) {
    o.rollout_options.discard_ratio = p->second.double_param();
  }
  if (auto p = params.find("rollout_start_layer"); p != params.end()) {
    const int64_t start = p->second.int64_param();
    if (start < 0 || start > (1 << 20)) {
      return absl::InvalidArgumentError("rollout_start_layer out of range");
    }
    o.rollout_options.start_layer = static_cast<int>(start);
  }
  if (!o.rollout && !o.gates && !o.resonance && !o.plug_gates && o.attention_layers.empty()) {
    return absl::InvalidArgumentError("explain parameter names no explanation");
  }
  return std::optional<ExplainOptions>(std::move(o));
}

// Per-example input shape [C, H, W]; -1 for H and W of models taking any size.
std::vector<int64_t> InputShape(const ModelConfig& config) {
  std::vector<int64_t> shape(config.input().shape().begin(), config.input().shape().end());
  if (config.input().any_size()) shape[1] = shape[2] = -1;
  return shape;
}

void FromHistogram(kv::StatisticDuration* d, prometheus::Histogram* h) {
  const auto m = h->Collect();
  SetDuration(d, m.histogram.sample_count, m.histogram.sample_sum);
}

// Collects the per-example results of one ModelInfer call and finishes it once all have
// arrived. Shared by the call's work items; thread-safe.
class InferCall {
 public:
  InferCall(ModelCall call, const kv::ModelInferRequest* request,
            kv::ModelInferResponse* response, size_t n)
      : call_(std::move(call)), model_(call_.model), request_(request), response_(response),
        results_(n), remaining_(n) {}

  // Records example i's result; the last one builds the response and finishes the call.
  void Complete(size_t i, absl::StatusOr<NamedTensors> result) {
    {
      absl::MutexLock lock(&mu_);
      if (!result.ok() && error_.ok()) error_ = result.status();
      if (result.ok()) results_[i] = *std::move(result);
      if (--remaining_ > 0) return;
    }
    absl::Status st = error_;
    if (st.ok()) {
      try {
        st = BuildResponse();
      } catch (const std::exception& e) {
        st = absl::InternalError(absl::StrCat("building the response failed: ", e.what()));
      }
    }
    call_.Finish(st);
  }

 private:
  absl::Status BuildResponse() {
    response_->set_model_name(model_->name);
    response_->set_model_version(model_->version);
    response_->set_id(request_->id());
    std::vector<std::string> names;
    if (request_->outputs_size() == 0) {
      for (const auto& [name, t] : *results_.front()) names.push_back(name);
      std::sort(names.begin(), names.end());
    } else {
      for (const auto& o : request_->outputs()) names.push_back(o.name());
    }
    for (const std::string& name : names) {
      std::vector<at::Tensor> rows;
      for (const auto& r : results_) {
        auto it = r->find(name);
        if (it == r->end()) {
          return absl::InvalidArgumentError(absl::StrCat("model has no output '", name, "'"));
        }
        if (!rows.empty() && rows.front().sizes() != it->second.sizes()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "output '", name, "' differs in shape between examples (inputs of different "
              "sizes); send them in separate requests"));
        }
        rows.push_back(it->second);
      }
      if (absl::Status st = AppendOutput(name, rows, response_); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  const ModelCall call_;
  const std::shared_ptr<ServedModel> model_;
  const kv::ModelInferRequest* const request_;
  kv::ModelInferResponse* const response_;
  absl::Mutex mu_;
  std::vector<std::optional<NamedTensors>> results_;
  size_t remaining_ ABSL_GUARDED_BY(mu_);
  absl::Status error_;
};

}  // namespace

KServeService::KServeService(ModelRepository* repository, bool explicit_control,
                             int64_t explain_max_bytes)
    : repository_(repository), model_control_(explicit_control),
      explain_max_bytes_(explain_max_bytes) {}

KServeService::~KServeService() {
  absl::MutexLock lock(&threads_mu_);
  for (auto& t : threads_) t.thread.join();
}

grpc::ServerUnaryReactor* KServeService::ServerLive(Ctx* ctx, const kv::ServerLiveRequest*,
                                                    kv::ServerLiveResponse* response) {
  response->set_live(true);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerReady(Ctx* ctx, const kv::ServerReadyRequest*,
                                                     kv::ServerReadyResponse* response) {
  bool ready = !shutting_down_.load();
  for (const auto& m : repository_->List()) ready &= m->ready();
  response->set_ready(ready);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelReady(Ctx* ctx,
                                                    const kv::ModelReadyRequest* request,
                                                    kv::ModelReadyResponse* response) {
  auto model = repository_->Find(request->name(), request->version());
  response->set_ready(model.ok() && (*model)->ready() && !shutting_down_.load());
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(Ctx* ctx,
                                                        const kv::ServerMetadataRequest*,
                                                        kv::ServerMetadataResponse* response) {
  response->set_name("gatescope");
  response->set_version("0.1.0");
  for (const char* ext : {"model_repository", "model_configuration", "statistics"}) {
    response->add_extensions(ext);
  }
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelMetadata(Ctx* ctx,
                                                       const kv::ModelMetadataRequest* request,
                                                       kv::ModelMetadataResponse* response) {
  auto found = repository_->Find(request->name(), request->version());
  if (!found.ok()) return Done(ctx, found.status());
  const ServedModel& model = **found;
  if (!model.ready()) return Done(ctx, absl::UnavailableError("model is not ready"));
  response->set_name(model.name);
  for (const auto& m : repository_->List()) {
    if (m->name == model.name) response->add_versions(m->version);
  }
  response->set_platform(kPlatform);
  auto* in = response->add_inputs();
  in->set_name(kInputName);
  in->set_datatype("FP32");
  in->add_shape(-1);
  for (int64_t d : InputShape(model.config)) in->add_shape(d);
  for (const DeclaredOutput& declared : DeclaredOutputs(model.config)) {
    auto* out = response->add_outputs();
    out->set_name(declared.name);
    out->set_datatype(declared.datatype);
    out->add_shape(-1);
    for (int64_t d : declared.shape) out->add_shape(d);
  }
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(Ctx* ctx,
                                                    const kv::ModelInferRequest* request,
                                                    kv::ModelInferResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  auto begun = BeginModelCall(reactor, *repository_, request->model_name(),
                              request->model_version(), shutting_down_.load());
  if (!begun) return reactor;
  const std::shared_ptr<ServedModel> model = begun->model;
  auto fail = [&](const absl::Status& st) {
    begun->Finish(st);
    return reactor;
  };
  auto explain = ParseExplainParameters(request->parameters());
  if (!explain.ok()) return fail(explain.status());
  const bool postprocessed = IsSegmentation(model->config) || IsDetection(model->config);
  if (postprocessed && explain->has_value()) {
    return fail(absl::InvalidArgumentError(
        "KServe explain parameters are not available for segmentation and detection models "
        "(use gatescope.v1 Explain)"));
  }
  auto det_options = DetectionParameters(model->config, request->parameters());
  if (!det_options.ok()) return fail(det_options.status());
  // An explanation's outputs are "logits" and the explanation tensors (no statistics).
  for (const auto& o : request->outputs()) {
    bool known = false;
    if (explain->has_value()) {
      known = o.name() == "logits" || IsExplanationOutput(o.name());
    } else {
      for (const auto& name : model->config.outputs()) known |= (name == o.name());
      known |= IsPostprocessedOutput(model->config, o.name());
    }
    if (!known) {
      return fail(
          absl::InvalidArgumentError(absl::StrCat("model has no output '", o.name(), "'")));
    }
  }
  auto makers = SplitInferInputs(*request, model->config.input());
  if (!makers.ok()) return fail(makers.status());
  if (makers->empty()) return fail(absl::InvalidArgumentError("ModelInfer: empty batch"));

  // Triton's request parameters: "priority" (1 = highest) and "timeout" (microseconds).
  int priority = 0;
  absl::Duration timeout = absl::ZeroDuration();
  if (auto it = request->parameters().find("priority"); it != request->parameters().end()) {
    const int64_t p = it->second.int64_param();
    if (p < 0 || p > kMaxPriorityLevels) {
      return fail(absl::InvalidArgumentError("priority parameter out of range"));
    }
    priority = static_cast<int>(p);
  }
  if (auto it = request->parameters().find("timeout"); it != request->parameters().end()) {
    const int64_t us = it->second.int64_param();
    if (us < 0 || us > (int64_t{1} << 40)) {
      return fail(absl::InvalidArgumentError("timeout parameter out of range"));
    }
    timeout = absl::Microseconds(us);
  }
  // One explanation per example, each checked against the cap before anything is queued.
  std::vector<std::shared_ptr<ExplanationBuilder>> builders;
  if (explain->has_value()) {
    for (size_t i = 0; i < makers->size(); ++i) {
      auto b = StartExplanation(*model, **explain, explain_max_bytes_);
      if (!b.ok()) return fail(b.status());
      builders.push_back(*std::move(b));
    }
  }
  auto call = std::make_shared<InferCall>(*begun, request, response, makers->size());
  for (size_t i = 0; i < makers->size(); ++i) {
    WorkItem item;
    // The example's size: written by make_input, read by done (worker thread, in order).
    auto size = std::make_shared<ImageSize>();
    item.make_input = [make = std::move((*makers)[i]), size] { return make(size.get()); };
    if (postprocessed) {
      item.done = [call, i, size, model, options = *det_options](absl::StatusOr<NamedTensors> r) {
        if (r.ok()) {
          try {
            absl::Status st = AddPostprocessedOutputs(model->config, *size, options, *r);
            if (!st.ok()) r = st;
          } catch (const std::exception& e) {
            r = absl::InternalError(absl::StrCat("postprocessing failed: ", e.what()));
          }
        }
        call->Complete(i, std::move(r));
      };
    } else if (builders.empty()) {
      item.done = [call, i](absl::StatusOr<NamedTensors> r) { call->Complete(i, std::move(r)); };
    } else {
      AttachExplanation(builders[i], model->config.layers(), item);
      item.shape_key = 1;  // never formed into a batch with predictions
      item.done = [call, i, builder = builders[i]](absl::StatusOr<NamedTensors> r) {
        if (r.ok()) {
          absl::StatusOr<Explanation> ex = builder->Finish();
          if (ex.ok()) {
            for (auto& [name, t] : ExplanationTensors(*ex)) r->insert_or_assign(name, t);
          } else {
            r = ex.status();
          }
        }
        call->Complete(i, std::move(r));
      };
    }
    item.priority = priority;
    item.timeout = timeout;
    AttachCallContext(ctx, item);
    if (absl::Status st = model->scheduler->Enqueue(std::move(item)); !st.ok()) {
      // This and the remaining examples never run; the call still finishes exactly once.
      for (size_t j = i; j < makers->size(); ++j) call->Complete(j, st);
      break;
    }
  }
  return reactor;
}

grpc::ServerUnaryReactor* KServeService::ModelConfig(Ctx* ctx,
                                                     const kv::ModelConfigRequest* request,
                                                     kv::ModelConfigResponse* response) {
  auto found = repository_->Find(request->name(), request->version());
  if (!found.ok()) return Done(ctx, found.status());
  const ServedModel& model = **found;
  if (!model.ready()) return Done(ctx, absl::UnavailableError("model is not ready"));
  auto* c = response->mutable_config();
  c->set_name(model.name);
  c->set_platform(kPlatform);
  c->set_backend("gatescope");
  const DynamicBatchingConfig& b = model.plan.batching;
  c->set_max_batch_size(b.max_batch_size);
  auto* in = c->add_input();
  in->set_name(kInputName);
  in->set_data_type(kv::TYPE_FP32);
  in->set_format(kv::ModelInput::FORMAT_NCHW);
  for (int64_t d : InputShape(model.config)) in->add_dims(d);
  for (const DeclaredOutput& declared : DeclaredOutputs(model.config)) {
    auto* out = c->add_output();
    out->set_name(declared.name);
    out->set_data_type(declared.type);
    for (int64_t d : declared.shape) out->add_dims(d);
  }
  auto* group = c->add_instance_group();
  group->set_name(model.name);
  group->set_count(model.plan.instances);
  group->set_kind(kv::ModelInstanceGroup::KIND_CPU);
  auto* db = c->mutable_dynamic_batching();
  for (int p : b.preferred_batch_sizes) db->add_preferred_batch_size(p);
  db->set_max_queue_delay_microseconds(absl::ToInt64Microseconds(b.max_queue_delay));
  db->set_priority_levels(b.priority_levels);
  db->set_default_priority_level(b.default_priority_level);
  auto* qp = db->mutable_default_queue_policy();
  qp->set_timeout_action(b.queue_policy.timeout_action == QueuePolicy::TimeoutAction::kDelay
                             ? kv::ModelQueuePolicy::DELAY
                             : kv::ModelQueuePolicy::REJECT);
  if (b.queue_policy.default_timeout != absl::InfiniteDuration()) {
    qp->set_default_timeout_microseconds(
        absl::ToInt64Microseconds(b.queue_policy.default_timeout));
  }
  qp->set_allow_timeout_override(b.queue_policy.allow_timeout_override);
  qp->set_max_queue_size(b.queue_policy.max_queue_size);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::ModelStatistics(
    Ctx* ctx, const kv::ModelStatisticsRequest* request,
    kv::ModelStatisticsResponse* response) {
  // Statistics are kept per model name; each version reports its model's totals.
  bool any = false;
  for (const auto& m : repository_->List()) {
    if (!request->name().empty() && m->name != request->name()) continue;
    if (!request->version().empty() && m->version != request->version()) continue;
    any = true;
    auto* s = response->add_model_stats();
    s->set_name(m->name);
    s->set_version(m->version);
    const ModelMetrics& mm = *m->metrics;
    const ModelMetrics::Totals totals = mm.totals();
    s->set_last_inference(totals.last_request_ms);
    s->set_inference_count(static_cast<uint64_t>(mm.inference_count->Value()));
    s->set_execution_count(static_cast<uint64_t>(mm.execution_count->Value()));
    auto* st = s->mutable_inference_stats();
    SetDuration(st->mutable_success(), totals.success_count, totals.success_ns / 1e9);
    SetDuration(st->mutable_fail(), totals.fail_count, totals.fail_ns / 1e9);
    FromHistogram(st->mutable_queue(), mm.queue_seconds);
    FromHistogram(st->mutable_compute_input(), mm.compute_input_seconds);
    FromHistogram(st->mutable_compute_infer(), mm.compute_infer_seconds);
    FromHistogram(st->mutable_compute_output(), mm.compute_output_seconds);
  }
  if (!any && !request->name().empty()) {
    return Done(ctx, absl::NotFoundError(absl::StrCat("unknown model '", request->name(), "'")));
  }
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KServeService::RepositoryIndex(
    Ctx* ctx, const kv::RepositoryIndexRequest* request,
    kv::RepositoryIndexResponse* response) {
  for (const auto& m : repository_->List()) {
    if (request->ready() && !m->ready()) continue;
    auto* e = response->add_models();
    e->set_name(m->name);
    e->set_version(m->version);
    e->set_state(m->ready() ? "READY" : "UNAVAILABLE");
    if (!m->ready()) e->set_reason(std::string(m->load_status.message()));
  }
  if (!request->ready()) {
    for (const std::string& name : repository_->ModelDirectories()) {
      if (repository_->Find(name, "").ok()) continue;
      auto* e = response->add_models();
      e->set_name(name);
      e->set_state("UNAVAILABLE");
      e->set_reason("not loaded");
    }
  }
  return Done(ctx, absl::OkStatus());
}

void KServeService::RunControl(Reactor* reactor, std::function<absl::Status()> work) {
  absl::MutexLock lock(&threads_mu_);
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t([reactor, work = std::move(work), done] {
    absl::Status st;
    try {
      st = work();
    } catch (const std::exception& e) {
      st = absl::InternalError(e.what());
    }
    reactor->Finish(ToGrpcStatus(st));
    done->store(true);
  });
  threads_.push_back({std::move(t), std::move(done)});
}

grpc::ServerUnaryReactor* KServeService::Control(Ctx* ctx,
                                                 std::function<absl::Status()> work) {
  if (!model_control_) {
    return Done(ctx, absl::FailedPreconditionError(
                         "explicit model control is off (start the server with "
                         "--model_control=explicit; with polling the repository directory "
                         "decides)"));
  }
  auto* reactor = ctx->DefaultReactor();
  RunControl(reactor, std::move(work));
  return reactor;
}

grpc::ServerUnaryReactor* KServeService::RepositoryModelLoad(
    Ctx* ctx, const kv::RepositoryModelLoadRequest* request,
    kv::RepositoryModelLoadResponse*) {
  return Control(ctx, [this, name = request->model_name()] {
    return repository_->LoadModel(name);
  });
}

grpc::ServerUnaryReactor* KServeService::RepositoryModelUnload(
    Ctx* ctx, const kv::RepositoryModelUnloadRequest* request,
    kv::RepositoryModelUnloadResponse*) {
  return Control(ctx, [this, name = request->model_name()] {
    return repository_->UnloadModel(name);
  });
}

}  // namespace gatescope
