// KServe v2 model information: ModelMetadata, ModelConfig (Triton's schema, with the
// instance groups as resolved: KIND_CPU or KIND_GPU with their GPUs), ModelStatistics and
// RepositoryIndex. Part of KServeCore (kserve_core.h).
#include "absl/strings/str_cat.h"
#include "server/frontend/core/kserve_core.h"
#include "server/repository/repository_names.h"
#include "server/tasks/task.h"

namespace gatescope {
namespace {

namespace kv = ::inference;
constexpr char kPlatform[] = "pytorch_libtorch";

void SetDuration(kv::StatisticDuration* d, uint64_t count, double seconds) {
  d->set_count(count);
  d->set_ns(static_cast<uint64_t>(seconds * 1e9));
}

void FromHistogram(kv::StatisticDuration* d, prometheus::Histogram* h) {
  const auto m = h->Collect();
  SetDuration(d, m.histogram.sample_count, m.histogram.sample_sum);
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

// Triton's model configuration of a ready model: its tensors, the instance groups as
// resolved (KIND_CPU, or KIND_GPU with its GPUs) and the batching in effect.
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
  FillDynamicBatching(model.plan.batching, c->mutable_dynamic_batching());
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
  // Statistics are kept per model name; each version reports its model's totals.
  bool any_name = false, any = false;
  for (const auto& m : repository_->List()) {
    if (!request.name().empty() && m->name != request.name()) continue;
    any_name = true;
    if (!request.version().empty() && m->version != request.version()) continue;
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
