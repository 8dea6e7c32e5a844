#include "client/model_output.h"

#include "client/connection.h"

namespace gatescope::client {

absl::StatusOr<std::unique_ptr<TaskOutput>> OpenTaskOutput(const InferenceClient& client,
                                                           const ModelTarget& target,
                                                           OutputSettings settings,
                                                           const std::vector<std::string>& inputs,
                                                           Report& report) {
  absl::StatusOr<v1::ModelConfig> config = FetchModelConfig(client, target);
  if (!config.ok()) {
    for (const std::string& file : inputs) report.ServerFailure(file, config.status());
    return nullptr;
  }
  settings.labels.assign(config->labels().begin(), config->labels().end());
  return NewTaskOutput(config->task(), std::move(settings));
}

}  // namespace gatescope::client
