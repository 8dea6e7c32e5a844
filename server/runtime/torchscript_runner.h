// ModelRunner over a TorchScript archive that follows the gatescope model contract:
// forward(x) -> Dict[str, Tensor], metadata JSON in the extra file "gatescope.json".
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

inline constexpr char kMetadataFile[] = "gatescope.json";

class TorchScriptRunner : public ModelRunner {
 public:
  struct Loaded {
    std::unique_ptr<TorchScriptRunner> runner;
    std::string metadata_json;  // contents of gatescope.json; empty if the archive has none
  };

  // Loads `path` on the CPU. Op libraries the model calls must be loaded first.
  // NOT_FOUND if the file is missing, INVALID_ARGUMENT if it is not loadable TorchScript.
  static absl::StatusOr<Loaded> Load(const std::string& path);

  ~TorchScriptRunner() override;

  // Runs under torch::InferenceMode; c10::Error becomes INTERNAL (INVALID_ARGUMENT for
  // shape errors the model raises on its input).
  absl::StatusOr<NamedTensors> Predict(const at::Tensor& batch) override;
  // Calls the exported explain_begin(x) (or explain_begin(x, args: List[float]) when `args`
  // is not empty) -> state, explain_layer(state, l) -> (state, Dict[str, Tensor]) for each
  // layer, and explain_end(state) -> Dict[str, Tensor]; the state is opaque (a tensor or a
  // tuple). UNIMPLEMENTED when the model lacks them.
  absl::StatusOr<NamedTensors> Explain(const at::Tensor& batch, int layers,
                                       const std::vector<double>& args,
                                       const LayerMapsVisitor& visit) override;

 private:
  struct Impl;
  explicit TorchScriptRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gatescope
