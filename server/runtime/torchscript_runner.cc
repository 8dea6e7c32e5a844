#include "server/runtime/torchscript_runner.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/runtime/jit_exception.h>
#include <torch/script.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gatescope {

struct TorchScriptRunner::Impl {
  std::unique_ptr<Device> device;
  torch::jit::Module module;
};

TorchScriptRunner::TorchScriptRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchScriptRunner::~TorchScriptRunner() = default;

absl::StatusOr<std::unique_ptr<TorchScriptRunner>> TorchScriptRunner::Load(
    const std::string& path, std::unique_ptr<Device> device) {
  if (!std::filesystem::is_regular_file(path)) {
    return absl::NotFoundError(absl::StrCat("no model file at ", path));
  }
  auto impl = std::make_unique<Impl>();
  try {
    impl->module = torch::jit::load(path, device->torch_device());
    impl->module.eval();
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load TorchScript ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load ", path, ": ", e.what()));
  }
  impl->device = std::move(device);
  return std::unique_ptr<TorchScriptRunner>(new TorchScriptRunner(std::move(impl)));
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

// Runs f, mapping what the model throws as ModelRunner promises: a TorchScript
// `raise ValueError(msg)` becomes INVALID_ARGUMENT with msg, everything else INTERNAL.
template <typename F>
absl::StatusOr<NamedTensors> Caught(const char* what, F&& f) {
  try {
    return f();
  } catch (const torch::jit::JITException& e) {
    const auto cls = e.getPythonClassName();
    if (cls.has_value() && absl::EndsWith(*cls, "ValueError")) {
      return absl::InvalidArgumentError(e.getOriginalMsg().value_or(e.what()));
    }
    return absl::InternalError(absl::StrCat(what, " failed: ", e.what()));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, " failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, " failed: ", e.what()));
  }
}

std::vector<c10::IValue> Arguments(const ModelInputs& inputs) {
  return std::vector<c10::IValue>(inputs.begin(), inputs.end());
}

int64_t BatchOf(const ModelInputs& inputs) {
  return inputs.empty() || inputs.front().dim() == 0 ? 0 : inputs.front().size(0);
}

}  // namespace

bool TorchScriptRunner::RecordsCudaGraphs() const { return impl_->device->records_cuda_graphs(); }

absl::StatusOr<NamedTensors> TorchScriptRunner::Predict(const ModelInputs& inputs) {
  return Caught("model", [&]() -> absl::StatusOr<NamedTensors> {
    c10::InferenceMode mode;
    const auto scope = impl_->device->Enter();
    auto forward = [this](const ModelInputs& on_device) {
      return impl_->module.forward(Arguments(on_device));
    };
    auto out = TensorDict(impl_->device->Run(inputs, forward), BatchOf(inputs), "model forward()");
    if (!out.ok()) return out.status();
    return impl_->device->CopyOut(*out);
  });
}

absl::StatusOr<NamedTensors> TorchScriptRunner::Explain(const ModelInputs& inputs, int layers,
                                                        const std::vector<double>& args,
                                                        const LayerMapsVisitor& visit) {
  return Caught("explain", [&]() -> absl::StatusOr<NamedTensors> {
    auto begin = impl_->module.find_method("explain_begin");
    auto layer = impl_->module.find_method("explain_layer");
    auto end = impl_->module.find_method("explain_end");
    if (!begin || !layer || !end) {
      return absl::UnimplementedError("model has no explain_begin/explain_layer/explain_end");
    }
    c10::InferenceMode mode;
    const auto scope = impl_->device->Enter();
    const int64_t batch = BatchOf(inputs);
    std::vector<c10::IValue> start = Arguments(impl_->device->CopyIn(inputs));
    if (!args.empty()) start.emplace_back(c10::List<double>(args));
    c10::IValue state = (*begin)(std::move(start));
    for (int l = 0; l < layers; ++l) {
      c10::IValue step = (*layer)({state, static_cast<int64_t>(l)});
      if (!step.isTuple() || step.toTupleRef().elements().size() != 2) {
        return absl::InternalError("explain_layer() must return (state, Dict[str, Tensor])");
      }
      state = step.toTupleRef().elements()[0];
      auto maps = TensorDict(step.toTupleRef().elements()[1], batch, "explain_layer()");
      step = c10::IValue();  // the visitor's copy of the maps is the only one left
      if (!maps.ok()) return maps.status();
      if (absl::Status st = visit(l, impl_->device->CopyOut(*maps)); !st.ok()) return st;
    }
    auto out = TensorDict((*end)({state}), batch, "explain_end()");
    if (!out.ok()) return out.status();
    return impl_->device->CopyOut(*out);
  });
}

absl::StatusOr<std::string> TorchScriptLoader::ReadMetadata(const std::string& path) const {
  auto metadata = ReadExtraFile(path, kMetadataFile);
  if (metadata.status().code() == absl::StatusCode::kNotFound &&
      std::filesystem::is_regular_file(path)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has no ", kMetadataFile, " metadata"));
  }
  return metadata;
}

absl::StatusOr<std::string> TorchScriptLoader::ReadExtraFile(const std::string& path,
                                                             const std::string& name) const {
  if (!std::filesystem::is_regular_file(path)) {
    return absl::NotFoundError(absl::StrCat("no model file at ", path));
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    const std::string record = absl::StrCat("extra/", name);
    if (!reader.hasRecord(record)) {
      return absl::NotFoundError(absl::StrCat(path, " has no extra file '", name, "'"));
    }
    auto [data, size] = reader.getRecord(record);
    return std::string(static_cast<const char*>(data.get()), size);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, ": ", e.what_without_backtrace()));
  }
}

absl::Status TorchScriptLoader::CheckOps(const std::string& name) const {
  const std::string prefix = name + "::";
  for (const auto& op : torch::jit::getAllOperators()) {
    if (absl::StartsWith(op->schema().name(), prefix)) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the model needs the op library '", name,
      "', which is not loaded (start the server with --ops_library)"));
}

absl::StatusOr<std::unique_ptr<ModelRunner>> TorchScriptLoader::Load(
    const std::string& path, const InstanceSpec& spec) const {
  absl::StatusOr<std::unique_ptr<Device>> device;
  try {
    device = OpenDevice(spec);  // a CUDA LibTorch may throw while setting the device up
  } catch (const c10::Error& e) {
    return absl::UnavailableError(absl::StrCat(DeviceName(spec), " cannot be used: ",
                                               e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(DeviceName(spec), " cannot be used: ", e.what()));
  }
  if (!device.ok()) return device.status();
  auto runner = TorchScriptRunner::Load(path, *std::move(device));
  if (!runner.ok()) return runner.status();
  return std::unique_ptr<ModelRunner>(*std::move(runner));
}

DeviceInventory TorchScriptLoader::Devices() const { return VisibleDevices(); }

}  // namespace gatescope
