// The tensor vocabulary between runners, tasks and explain collectors.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"

namespace gatescope {

// Named model outputs or maps.
using NamedTensors = std::unordered_map<std::string, at::Tensor>;

// A model call's positional inputs, each leading with the batch dimension (e.g. images
// [B, C, H, W]; token ids [B, T] and their mask [B, T]).
using ModelInputs = std::vector<at::Tensor>;

// Receives one layer's maps during an explanation pass; the maps are released when it
// returns. A non-OK status stops the pass with that status.
using LayerMapsVisitor = std::function<absl::Status(int layer, const NamedTensors& maps)>;

}  // namespace gatescope
