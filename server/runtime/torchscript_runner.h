// ModelRunner over a TorchScript archive that follows the gatescope model contract:
// forward(inputs...) -> Dict[str, Tensor]; explain_begin / explain_layer / explain_end for
// the layer-by-layer explanation pass; metadata JSON in the extra file "gatescope.json".
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/runtime/device.h"
#include "server/runtime/model_loader.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

inline constexpr char kMetadataFile[] = "gatescope.json";

class TorchScriptRunner final : public ModelRunner {
 public:
  // Loads `path` onto `device` (owned from now on). Op libraries the model calls must be
  // loaded first. NOT_FOUND if the file is missing, INVALID_ARGUMENT if it is not loadable.
  static absl::StatusOr<std::unique_ptr<TorchScriptRunner>> Load(const std::string& path,
                                                                 std::unique_ptr<Device> device);
  ~TorchScriptRunner() override;

  // Both run under torch::InferenceMode inside the device's scope; see ModelRunner.
  absl::StatusOr<NamedTensors> Predict(const ModelInputs& inputs) override;
  bool RecordsCudaGraphs() const override;
  // Calls the exported explain_begin(inputs...) (or explain_begin(inputs..., args:
  // List[float]) when `args` is not empty) -> state, explain_layer(state, l) -> (state,
  // Dict[str, Tensor]) for each layer, and explain_end(state) -> Dict[str, Tensor]; the
  // state is opaque. UNIMPLEMENTED when the model lacks them.
  absl::StatusOr<NamedTensors> Explain(const ModelInputs& inputs, int layers,
                                       const std::vector<double>& args,
                                       const LayerMapsVisitor& visit) override;

 private:
  struct Impl;
  explicit TorchScriptRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ModelLoader for TorchScript archives on the devices of this process.
class TorchScriptLoader final : public ModelLoader {
 public:
  absl::StatusOr<std::string> ReadMetadata(const std::string& path) const override;
  absl::StatusOr<std::string> ReadExtraFile(const std::string& path,
                                            const std::string& name) const override;
  absl::Status CheckOps(const std::string& name) const override;
  absl::StatusOr<std::unique_ptr<ModelRunner>> Load(const std::string& path,
                                                    const InstanceSpec& spec) const override;
  DeviceInventory Devices() const override;
};

}  // namespace gatescope
