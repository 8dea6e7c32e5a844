#include "server/runtime/torchscript_runner.h"

#include <torch/script.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gatescope {

struct TorchScriptRunner::Impl {
  torch::jit::Module module;
};

TorchScriptRunner::TorchScriptRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchScriptRunner::~TorchScriptRunner() = default;

absl::StatusOr<TorchScriptRunner::Loaded> TorchScriptRunner::Load(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    return absl::NotFoundError(absl::StrCat("no model file at ", path));
  }
  auto impl = std::make_unique<Impl>();
  torch::jit::ExtraFilesMap extra{{kMetadataFile, ""}};
  try {
    impl->module = torch::jit::load(path, torch::kCPU, extra);
    impl->module.eval();
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load TorchScript ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load ", path, ": ", e.what()));
  }
  Loaded loaded;
  loaded.metadata_json = extra[kMetadataFile];
  loaded.runner.reset(new TorchScriptRunner(std::move(impl)));
  return loaded;
}

namespace {

// A Dict[str, Tensor] whose tensors all lead with the batch dimension `batch`.
absl::StatusOr<NamedTensors> TensorDict(const c10::IValue& value, int64_t batch,
                                        const char* what) {
  if (!value.isGenericDict()) {
    return absl::InternalError(absl::StrCat(what, " must return Dict[str, Tensor]"));
  }
  NamedTensors out;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      return absl::InternalError(absl::StrCat(what, " must return Dict[str, Tensor]"));
    }
    at::Tensor t = entry.value().toTensor();
    if (t.dim() == 0 || t.size(0) != batch) {
      return absl::InternalError(
          absl::StrCat(what, " output '", entry.key().toStringRef(), "' lacks the batch dim"));
    }
    out.emplace(entry.key().toStringRef(), std::move(t));
  }
  return out;
}

// Runs f, turning Torch and standard exceptions into INTERNAL errors prefixed by `what`.
template <typename F>
absl::StatusOr<NamedTensors> Caught(const char* what, F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, " failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, " failed: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<NamedTensors> TorchScriptRunner::Predict(const at::Tensor& batch) {
  return Caught("model", [&]() -> absl::StatusOr<NamedTensors> {
    c10::InferenceMode guard;
    return TensorDict(impl_->module.forward({batch}), batch.size(0), "model forward()");
  });
}

absl::StatusOr<NamedTensors> TorchScriptRunner::Explain(const at::Tensor& batch, int layers,
                                                        const std::vector<double>& args,
                                                        const LayerMapsVisitor& visit) {
  return Caught("explain", [&]() -> absl::StatusOr<NamedTensors> {
    auto begin = impl_->module.find_method("explain_begin");
    auto layer = impl_->module.find_method("explain_layer");
    auto end = impl_->module.find_method("explain_end");
    if (!begin || !layer || !end) {
      return absl::UnimplementedError("model has no explain_begin/explain_layer/explain_end");
    }
    c10::InferenceMode guard;
    c10::IValue tokens = args.empty() ? (*begin)({batch})
                                      : (*begin)({batch, c10::List<double>(args)});
    for (int l = 0; l < layers; ++l) {
      c10::IValue step = (*layer)({tokens, static_cast<int64_t>(l)});
      if (!step.isTuple() || step.toTupleRef().elements().size() != 2) {
        return absl::InternalError("explain_layer() must return (Tensor, Dict[str, Tensor])");
      }
      tokens = step.toTupleRef().elements()[0];
      auto maps = TensorDict(step.toTupleRef().elements()[1], batch.size(0), "explain_layer()");
      step = c10::IValue();  // the visitor's copy of the maps is the only one left
      if (!maps.ok()) return maps.status();
      if (absl::Status st = visit(l, *maps); !st.ok()) return st;
    }
    return TensorDict((*end)({tokens}), batch.size(0), "explain_end()");
  });
}

}  // namespace gatescope
