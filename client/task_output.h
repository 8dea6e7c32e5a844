// The per-task part of gatescope-client: how one model task's responses become the JSON
// members of an input's output line and the files under --out. Commands pick one
// TaskOutput per run from the task in the model's metadata (NewTaskOutput) and never ask
// which task it is.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/input_image.h"
#include "client/output_paths.h"
#include "client/panel.h"
#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

// What a command asks of its outputs; the same for all its inputs.
struct OutputSettings {
  std::string out_dir;          // empty: predict writes no files (explain always has one)
  bool several_inputs = false;  // more than one input: fixed file names get a file prefix
  bool json_maps = false;       // explain --format json (classifiers)
  std::optional<::gatescope::v1::QueryPixel> query;  // explain --query (segmentation)
  std::vector<std::string> labels;                   // the model's class names
  std::vector<std::string> maps;                     // the maps it declares (ModelConfig.maps)
  std::string model, version;  // as the server names them (the version that answered)
  ScaleMode scale = ScaleMode::kShared;  // explain pictures: one colour scale or per tile
};

// Renders one task's responses. Not thread-safe (it remembers the output names it gave);
// a command owns one and calls it from its own thread, one input at a time.
class TaskOutput {
 public:
  explicit TaskOutput(OutputSettings settings)
      : settings_(std::move(settings)), paths_(settings_.out_dir, settings_.several_inputs) {}
  virtual ~TaskOutput() = default;

  // Completes an Explain `request` that the command made from its flags with what this
  // task's output always shows (e.g. text models: rollout, and gates where the model has
  // them). Default: the request as made.
  virtual void CompleteExplainRequest(::gatescope::v1::ExplainRequest&) const {}

  // The JSON members (each after a comma) of `input`'s line for a successful Predict
  // `response`, after writing the files the settings ask for. An error fails this input
  // alone (printed with code CLIENT).
  virtual absl::StatusOr<std::string> Predict(const InputImage& input,
                                              const ::gatescope::v1::PredictResponse& response) = 0;

  // The same for a successful Explain `response` to `request` (`input.image` is decoded;
  // a text input has none).
  virtual absl::StatusOr<std::string> Explain(const InputImage& input,
                                              const ::gatescope::v1::ExplainRequest& request,
                                              const ::gatescope::v1::ExplainResponse& response) = 0;

 protected:
  const OutputSettings& settings() const { return settings_; }
  OutputPaths& paths() { return paths_; }

 private:
  OutputSettings settings_;
  OutputPaths paths_;
};

// How the registry makes a task's TaskOutput. A task file defines its factory as
//   extern const TaskFactory kMyTaskOutput = &NewOutput<MyTaskOutput>;
using TaskFactory = std::unique_ptr<TaskOutput> (*)(OutputSettings settings);

template <typename T>
std::unique_ptr<TaskOutput> NewOutput(OutputSettings settings) {
  return std::make_unique<T>(std::move(settings));
}

// The TaskOutput of `task` (ModelConfig.task); INVALID_ARGUMENT naming the tasks the client
// knows if it knows no such task. See task_registry.cc for adding one.
absl::StatusOr<std::unique_ptr<TaskOutput>> NewTaskOutput(const std::string& task,
                                                          OutputSettings settings);

}  // namespace gatescope::client
