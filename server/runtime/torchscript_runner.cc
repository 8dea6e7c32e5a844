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

absl::StatusOr<NamedTensors> TorchScriptRunner::Predict(const at::Tensor& batch) {
  try {
    c10::InferenceMode guard;
    const c10::IValue result = impl_->module.forward({batch});
    if (!result.isGenericDict()) {
      return absl::InternalError("model forward() must return Dict[str, Tensor]");
    }
    NamedTensors out;
    for (const auto& entry : result.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        return absl::InternalError("model forward() must return Dict[str, Tensor]");
      }
      at::Tensor t = entry.value().toTensor();
      if (t.dim() == 0 || t.size(0) != batch.size(0)) {
        return absl::InternalError(absl::StrCat("output '", entry.key().toStringRef(),
                                                "' lacks the batch dimension"));
      }
      out.emplace(entry.key().toStringRef(), std::move(t));
    }
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("model failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("model failed: ", e.what()));
  }
}

absl::StatusOr<NamedTensors> TorchScriptRunner::Explain(const at::Tensor& batch) {
  try {
    auto method = impl_->module.find_method("explain");
    if (!method.has_value()) return absl::UnimplementedError("model has no explain()");
    c10::InferenceMode guard;
    const c10::IValue result = (*method)({batch});
    if (!result.isGenericDict()) {
      return absl::InternalError("explain() must return Dict[str, List[Tensor]]");
    }
    NamedTensors out;
    for (const auto& entry : result.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isList()) {
        return absl::InternalError("explain() must return Dict[str, List[Tensor]]");
      }
      const std::string kind = entry.key().toStringRef();
      const auto list = entry.value().toList();
      for (size_t i = 0; i < list.size(); ++i) {
        const c10::IValue item = list.get(i);
        if (!item.isTensor()) return absl::InternalError("explain() lists must hold tensors");
        at::Tensor t = item.toTensor();
        if (t.dim() == 0 || t.size(0) != batch.size(0)) {
          return absl::InternalError(absl::StrCat("explain() '", kind, "' lacks the batch dim"));
        }
        out.emplace(kind == "logits" ? kind : absl::StrCat(kind, ".", i), std::move(t));
      }
    }
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("explain failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("explain failed: ", e.what()));
  }
}

}  // namespace gatescope
