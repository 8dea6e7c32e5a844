#include "server/frontend/grpc/inference_service.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/frontend/grpc/status_mapping.h"
#include "server/postprocess/classification.h"
#include "server/preprocess/image.h"

namespace gatescope {
namespace {

using ::gatescope::v1::PredictRequest;
using ::gatescope::v1::PredictResponse;

constexpr int kDefaultTopK = 5;

// Validates what can be checked without decoding. Runs on the gRPC thread (cheap).
absl::Status CheckRequest(const PredictRequest& request) {
  if (request.top_k() < 0) return absl::InvalidArgumentError("top_k must be >= 0");
  switch (request.input_case()) {
    case PredictRequest::kImage:
      if (request.image().empty()) return absl::InvalidArgumentError("image is empty");
      return absl::OkStatus();
    case PredictRequest::kTensor: {
      const auto dtype = request.tensor().dtype();
      if (dtype != v1::Tensor::UINT8 && dtype != v1::Tensor::FLOAT32) {
        return absl::InvalidArgumentError("tensor.dtype must be UINT8 or FLOAT32");
      }
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError("request has no input (set image or tensor)");
  }
}

// Builds the model input; runs on the model's worker thread.
absl::StatusOr<at::Tensor> MakeInput(const PredictRequest& request, const InputSpec& spec) {
  if (request.input_case() == PredictRequest::kImage) return DecodeImage(request.image(), spec);
  const auto& t = request.tensor();
  const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  return PixelsToTensor(t.data(),
                        t.dtype() == v1::Tensor::UINT8 ? PixelType::kUint8 : PixelType::kFloat32,
                        shape, spec);
}

absl::Status FillResponse(const ServedModel& model, const NamedTensors& outputs, int top_k,
                          PredictResponse* response) {
  auto logits = outputs.find("logits");
  if (logits == outputs.end()) return absl::InternalError("model returned no 'logits'");
  auto classes = TopKClasses(logits->second, model.config.labels(), top_k);
  if (!classes.ok()) return classes.status();
  response->set_model_name(model.name);
  response->set_model_version(model.version);
  for (const auto& c : *classes) {
    auto* out = response->add_classes();
    out->set_label(c.label);
    out->set_index(c.index);
    out->set_probability(c.probability);
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* InferenceService::Predict(grpc::CallbackServerContext* context,
                                                    const PredictRequest* request,
                                                    PredictResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const auto start = std::chrono::steady_clock::now();
  auto found = repository_->Find(request->model_name(), request->model_version());
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(found.status()));
    return reactor;
  }
  std::shared_ptr<ServedModel> model = *std::move(found);
  auto finish = [reactor, model, start](const absl::Status& status) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    model->metrics->RecordRequest(StatusCodeName(status.code()), took.count());
    reactor->Finish(ToGrpcStatus(status));
  };
  absl::Status st = CheckRequest(*request);
  if (st.ok() && shutting_down_.load()) st = absl::UnavailableError("server is shutting down");
  if (st.ok() && !model->ready()) {
    st = absl::UnavailableError(absl::StrCat("model '", model->name,
                                             "' failed to load: ", model->load_status.message()));
  }
  if (!st.ok()) {
    finish(st);
    return reactor;
  }
  const int top_k = request->top_k() == 0 ? kDefaultTopK : request->top_k();
  WorkItem item;
  item.make_input = [request, model] { return MakeInput(*request, model->config.input()); };
  item.done = [finish, model, response, top_k](absl::StatusOr<NamedTensors> outputs) {
    absl::Status st = outputs.status();
    if (st.ok()) {
      try {
        st = FillResponse(*model, *outputs, top_k, response);
      } catch (const std::exception& e) {
        st = absl::InternalError(absl::StrCat("postprocessing failed: ", e.what()));
      }
    }
    finish(st);
  };
  item.cancelled = [context] { return context->IsCancelled(); };
  item.priority = static_cast<int>(std::min<uint32_t>(request->priority(), 1u << 20));
  item.timeout = absl::Microseconds(
      static_cast<int64_t>(std::min<uint64_t>(request->timeout_microseconds(), 1ull << 40)));
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    item.deadline = absl::FromChrono(deadline);
  }
  st = model->scheduler->Enqueue(std::move(item));
  if (!st.ok()) finish(st);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::ListModels(
    grpc::CallbackServerContext* context, const ::gatescope::v1::ListModelsRequest*,
    ::gatescope::v1::ListModelsResponse* response) {
  for (const auto& model : repository_->List()) {
    auto* m = response->add_models();
    m->set_name(model->name);
    m->set_version(model->version);
    m->set_ready(model->ready());
    m->set_task(model->config.task());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetModelMetadata(
    grpc::CallbackServerContext* context, const ::gatescope::v1::ModelMetadataRequest* request,
    ::gatescope::v1::ModelMetadataResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto found = repository_->Find(request->model_name(), request->model_version());
  if (!found.ok()) {
    reactor->Finish(ToGrpcStatus(found.status()));
    return reactor;
  }
  const ServedModel& model = **found;
  response->set_name(model.name);
  response->set_version(model.version);
  response->set_ready(model.ready());
  *response->mutable_config() = model.config;
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gatescope
