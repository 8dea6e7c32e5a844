// Per-model serving settings: config.pbtxt (Triton field names) over server defaults.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gatescope/v1/model_config.pb.h"
#include "server/config/batching_config.h"
#include "server/config/instance_spec.h"

namespace gatescope {

struct ServingDefaults {
  int max_batch_size = 16;        // capped by the model's own max_batch_size
  int max_queue_size = 256;       // per priority level
  absl::Duration max_queue_delay = absl::ZeroDuration();
  // DynamicBatchingConfig::release_when_arrivals_are_sparse of every model.
  bool early_batch_release = false;
  int instances = 1;  // CPU instances when config.pbtxt has no instance_group
  // DynamicBatchingConfig::idle_poll of every model (the server sets it only when the
  // forward passes have CPUs of their own).
  absl::Duration idle_poll = absl::ZeroDuration();
  // InstanceSpec::cuda_graphs of GPU instances of models whose config.pbtxt has no
  // `optimization { cuda { ... } }` block.
  bool cuda_graphs = false;
  // Every instance runs its warm-up forwards (instance_warm_up.h) before its model serves.
  bool warm_up = true;
};

struct ServingPlan {
  DynamicBatchingConfig batching;
  // One per model instance, in group order.
  std::vector<InstanceSpec> instances;
  // The instance groups as resolved (KIND_AUTO made CPU or GPU, GPUs listed), for
  // KServe ModelConfig.
  std::vector<::inference::ModelInstanceGroup> groups;
  // config.pbtxt's model_warmup samples (empty: the server's own warm-up).
  std::vector<::inference::ModelWarmup> warm_up;
};

// Parses config.pbtxt text (empty text: no overrides). INVALID_ARGUMENT on syntax errors
// or unknown fields, with the parser's line and column.
absl::StatusOr<::gatescope::v1::ServingConfig> ParseServingConfig(std::string_view text);

// Combines server defaults, the archive's max_batch_size (0: none) and the overrides.
// GPU instances get cuda_graphs from config.pbtxt's `optimization.cuda.graphs` when the
// `cuda` block is there, else from the defaults; CPU instances never (Triton, too, leaves
// the setting to the backends that can use it).
// instance_group follows Triton: KIND_CPU `count` instances; KIND_GPU `count` on each of
// `gpus` (empty: each of the `devices.gpus` visible GPUs); KIND_AUTO as KIND_GPU when a GPU
// is visible, else as KIND_CPU. INVALID_ARGUMENT for out-of-range values or KIND_MODEL;
// UNAVAILABLE for KIND_GPU without a visible GPU (with devices.no_gpu_reason). Whether a
// listed GPU exists is checked when its instance loads. model_warmup samples need a
// batch_size in 1..max_batch_size, count <= 1000, exactly one input, and zero_data,
// random_data or an input_data_file that names a file below the model's warmup/
// directory (relative, no ".." component; INVALID_ARGUMENT otherwise).
absl::StatusOr<ServingPlan> MakeServingPlan(const ServingDefaults& defaults,
                                            int model_max_batch_size,
                                            const ::gatescope::v1::ServingConfig& overrides,
                                            const DeviceInventory& devices = {});

}  // namespace gatescope
