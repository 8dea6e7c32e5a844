#include "client/model_output.h"

#include "client/connection.h"

namespace gatescope::client {

absl::StatusOr<std::unique_ptr<TaskOutput>> OpenTaskOutput(const InferenceClient& client,
                                                           const ModelTarget& target,
                                                           OutputSettings settings,
                                                           const std::vector<std::string>& inputs,
                                                           Report& report) {
  absl::StatusOr<v1::ModelMetadataResponse> metadata = FetchModelMetadata(client, target);
  if (!metadata.ok()) {
    for (const std::string& file : inputs) report.ServerFailure(file, metadata.status());
    return nullptr;
  }
  const v1::ModelConfig& config = metadata->config();
  settings.model = metadata->name();
  settings.version = metadata->version();
  settings.labels.assign(config.labels().begin(), config.labels().end());
  settings.maps.assign(config.maps().begin(), config.maps().end());
  report.SetModel(settings.model, settings.version, config.task());
  return NewTaskOutput(config.task(), std::move(settings));
}

}  // namespace gatescope::client
