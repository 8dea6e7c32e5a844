// KServe v2 model information: ModelMetadata, ModelConfig (Triton's schema, with the
// instance groups as resolved: KIND_CPU or KIND_GPU with their GPUs), ModelStatistics and
// RepositoryIndex. Part of KServeCore (kserve_core.h).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/frontend/core/kserve_core.h"
#include "server/repository/repository_names.h"
#include "server/tasks/task.h"

namespace gatescope {
namespace {

namespace kv = ::inference;
constexpr char kPlatform[] = "pytorch_libtorch";

void SetDuration(kv::StatisticDuration* d, const DurationTotal& total) {
  d->set_count(total.count);
  d->set_ns(total.ns);
}

// ModelMetadata's view of a tensor: the batch dimension (-1) before the declared shape.
void AddTensorMetadata(const DeclaredTensor& declared,
                       kv::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(declared.name);
  out->set_datatype(declared.datatype);
  out->add_shape(-1);
  for (int64_t d : declared.shape) out->add_shape(d);
}

void FillDynamicBatching(const DynamicBatchingConfig& b, kv::ModelDynamicBatching* db) {
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
}

// What ModelMetadata cannot say (one datatype per input, no preprocessing, no labels), as
// Triton-style string parameters: the input datatypes ModelInfer accepts besides the
// declared FP32 (UINT8 pixels and BYTES encoded images are normalised by the server as
// below; FP32 must come normalised), the colour and normalisation, the task, and the class
// labels as a JSON array.
void FillParameters(const ModelConfig& config,
                    google::protobuf::Map<std::string, kv::ModelParameter>* p) {
  auto set = [p](const char* key, std::string value) {
    (*p)[key].set_string_value(std::move(value));
  };
  set("task", config.task());
  set("input_datatypes", "FP32,UINT8,BYTES");
  set("input_color", config.input().color());
  const std::string& normalization = config.input().normalization();
  set("input_normalization", normalization.empty() ? "mean_std" : normalization);
  if (normalization != "minmax") {
    set("input_scale", absl::StrCat(config.input().scale()));
    set("input_mean", absl::StrJoin(config.input().mean(), ","));
    set("input_std", absl::StrJoin(config.input().std(), ","));
  }
  if (config.labels_size() > 0) {
    const nlohmann::json labels(
        std::vector<std::string>(config.labels().begin(), config.labels().end()));
    set("labels", labels.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

// Triton's model configuration of a ready model: its tensors, the instance groups as
// resolved (KIND_CPU, or KIND_GPU with its GPUs), the batching in effect and whether GPU
// instances replay CUDA graphs.
void FillModelConfig(const ServedModel& model, kv::ModelConfig* c) {
  c->set_name(model.name);
  c->set_platform(kPlatform);
  c->set_backend("gatescope");
  c->set_max_batch_size(model.plan.batching.max_batch_size);
  const KServeSignature signature = model.task->Signature();
  auto* in = c->add_input();
  in->set_name(signature.input.name);
  in->set_data_type(signature.input.type);
  in->set_format(signature.format);
  for (int64_t d : signature.input.shape) in->add_dims(d);
  for (const DeclaredTensor& declared : signature.outputs) {
    auto* out = c->add_output();
    out->set_name(declared.name);
    out->set_data_type(declared.type);
    for (int64_t d : declared.shape) out->add_dims(d);
  }
  for (const auto& group : model.plan.groups) *c->add_instance_group() = group;
  for (const InstanceSpec& instance : model.plan.instances) {
    if (instance.cuda_graphs) c->mutable_optimization()->mutable_cuda()->set_graphs(true);
  }
  FillDynamicBatching(model.plan.batching, c->mutable_dynamic_batching());
  for (const auto& sample : model.plan.warm_up) *c->add_model_warmup() = sample;
  FillParameters(model.config, c->mutable_parameters());
}

// A ready model: NOT_FOUND, or UNAVAILABLE when it is not ready.
absl::StatusOr<std::shared_ptr<ServedModel>> ReadyModel(const ModelRepository& repository,
                                                       const std::string& name,
                                                       const std::string& version) {
  auto found = repository.Find(name, version);
  if (!found.ok()) return found.status();
  if (!(*found)->ready()) return absl::UnavailableError("model is not ready");
  return found;
}

}  // namespace

absl::Status KServeCore::ModelMetadata(const kv::ModelMetadataRequest& request,
                                       kv::ModelMetadataResponse* response) const {
  auto found = ReadyModel(*repository_, request.name(), request.version());
  if (!found.ok()) return found.status();
  const ServedModel& model = **found;
  response->set_name(model.name);
  for (const auto& m : repository_->List()) {
    if (m->name == model.name) response->add_versions(m->version);
  }
  response->set_platform(kPlatform);
  const KServeSignature signature = model.task->Signature();
  AddTensorMetadata(signature.input, response->add_inputs());
  for (const DeclaredTensor& declared : signature.outputs) {
    AddTensorMetadata(declared, response->add_outputs());
  }
  return absl::OkStatus();
}

absl::Status KServeCore::ModelConfig(const kv::ModelConfigRequest& request,
                                     kv::ModelConfigResponse* response) const {
  auto found = ReadyModel(*repository_, request.name(), request.version());
  if (!found.ok()) return found.status();
  FillModelConfig(**found, response->mutable_config());
  return absl::OkStatus();
}

absl::Status KServeCore::ModelStatistics(const kv::ModelStatisticsRequest& request,
                                         kv::ModelStatisticsResponse* response) const {
  // Each loaded version reports its own statistics (version_statistics.h: inference
  // statistics count examples, batch statistics executions).
  bool any_name = false, any = false;
  for (const auto& m : repository_->List()) {
    if (!request.name().empty() && m->name != request.name()) continue;
    any_name = true;
    if (!request.version().empty() && m->version != request.version()) continue;
    any = true;
    auto* s = response->add_model_stats();
    s->set_name(m->name);
    s->set_version(m->version);
    if (!m->observer) continue;  // failed to load: nothing ran
    const StatisticsSnapshot st = m->observer->statistics().Snapshot();
    s->set_last_inference(st.last_inference_ms);
    s->set_inference_count(st.inference_count);
    s->set_execution_count(st.execution_count);
    auto* is = s->mutable_inference_stats();
    SetDuration(is->mutable_success(), st.success);
    SetDuration(is->mutable_fail(), st.fail);
    SetDuration(is->mutable_queue(), st.queue);
    SetDuration(is->mutable_compute_input(), st.compute_input);
    SetDuration(is->mutable_compute_infer(), st.compute_infer);
    SetDuration(is->mutable_compute_output(), st.compute_output);
    for (const auto& [size, batch] : st.batches) {
      auto* b = s->add_batch_stats();
      b->set_batch_size(static_cast<uint64_t>(size));
      SetDuration(b->mutable_compute_input(), batch.compute_input);
      SetDuration(b->mutable_compute_infer(), batch.compute_infer);
      SetDuration(b->mutable_compute_output(), batch.compute_output);
    }
  }
  if (!any && !request.name().empty()) {
    if (any_name) {
      return absl::NotFoundError(absl::StrCat("model ", QuoteName(request.name()),
                                              " has no version ", QuoteName(request.version())));
    }
    return absl::NotFoundError(absl::StrCat("unknown model ", QuoteName(request.name())));
  }
  return absl::OkStatus();
}

void KServeCore::RepositoryIndex(const kv::RepositoryIndexRequest& request,
                                 kv::RepositoryIndexResponse* response) const {
  for (const auto& m : repository_->List()) {
    if (request.ready() && !m->ready()) continue;
    auto* e = response->add_models();
    e->set_name(m->name);
    e->set_version(m->version);
    e->set_state(m->ready() ? "READY" : "UNAVAILABLE");
    if (!m->ready()) e->set_reason(std::string(m->load_status.message()));
  }
  if (!request.ready()) {
    for (const std::string& name : repository_->ModelDirectories()) {
      if (repository_->Find(name, "").ok()) continue;
      auto* e = response->add_models();
      e->set_name(name);
      e->set_state("UNAVAILABLE");
      e->set_reason("not loaded");
    }
  }
}

}  // namespace gatescope
