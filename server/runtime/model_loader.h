// How the repository turns model files into runners: one seam, implemented for
// TorchScript archives here (TorchScriptLoader) and by fakes in tests.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/config/instance_spec.h"
#include "server/runtime/model_runner.h"

namespace gatescope {

class ModelLoader {
 public:
  virtual ~ModelLoader() = default;
  // The model's self-description (the archive's gatescope.json) without loading the
  // model. NOT_FOUND when the file is missing, INVALID_ARGUMENT when it is not a model
  // archive or carries no metadata.
  virtual absl::StatusOr<std::string> ReadMetadata(const std::string& path) const = 0;
  // Another extra file `name` of the archive (e.g. a text model's tokenizer), without
  // loading the model. NOT_FOUND when the file or the entry is missing, INVALID_ARGUMENT
  // when it is not a model archive.
  virtual absl::StatusOr<std::string> ReadExtraFile(const std::string& path,
                                                    const std::string& name) const = 0;
  // OK if the op library `name` (a model's required_ops entry, e.g. "gatescope") has
  // registered its ops in this process; FAILED_PRECONDITION otherwise.
  virtual absl::Status CheckOps(const std::string& name) const = 0;
  // One instance of the model on the device `spec` names. UNAVAILABLE when that device
  // cannot be used; INVALID_ARGUMENT when the file is not a loadable model. Blocks.
  virtual absl::StatusOr<std::unique_ptr<ModelRunner>> Load(const std::string& path,
                                                            const InstanceSpec& spec) const = 0;
  // The GPUs instances may be placed on.
  virtual DeviceInventory Devices() const = 0;
};

}  // namespace gatescope
