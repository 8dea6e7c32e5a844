// Helpers for task tests: a task from metadata JSON, and v1 pixel tensors.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/config/model_config.h"
#include "server/tasks/task_registry.h"

namespace gatescope::testing {

inline std::unique_ptr<Task> TaskFrom(const std::string& json, int64_t explain_max_bytes = 1 << 30) {
  auto config = ParseModelConfig(json);
  EXPECT_TRUE(config.ok()) << config.status();
  TaskOptions options;
  options.explain_max_bytes = explain_max_bytes;
  auto task = CreateTask(*config, options);
  EXPECT_TRUE(task.ok()) << task.status();
  return *std::move(task);
}

// An image classifier with labels a, b, c over inputs of `shape` [C, H, W].
inline std::unique_ptr<Task> ImageClassifier(const std::vector<int64_t>& shape) {
  ModelConfig config;
  config.set_task("image_classification");
  for (int64_t d : shape) config.mutable_input()->add_shape(d);
  for (const char* l : {"a", "b", "c"}) config.add_labels(l);
  config.add_outputs("logits");
  auto task = CreateTask(config, TaskOptions());
  EXPECT_TRUE(task.ok()) << task.status();
  return *std::move(task);
}

// A UINT8 [h, w] pixel tensor of zeros.
inline void SetGrayPixels(::gatescope::v1::Tensor* t, int64_t h, int64_t w) {
  t->set_dtype(::gatescope::v1::Tensor::UINT8);
  t->add_shape(h);
  t->add_shape(w);
  t->set_data(std::string(static_cast<size_t>(h * w), '\0'));
}

// Records a call's outcome.
struct Outcome {
  absl::Status status = absl::UnknownError("not finished");
  int calls = 0;
  std::function<void(absl::Status)> Done() {
    return [this](absl::Status st) {
      status = std::move(st);
      ++calls;
    };
  }
};

}  // namespace gatescope::testing
