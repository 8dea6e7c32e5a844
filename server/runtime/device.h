// The device seam: where a model instance's tensors live and its calls run. Only the GPU
// implementation (gpu_device_cuda.cc) touches CUDA; it is compiled only against a LibTorch
// built with CUDA. With any other LibTorch a GPU cannot be opened (UNAVAILABLE, with the
// reason).
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "server/config/instance_spec.h"
#include "server/runtime/named_tensors.h"

namespace gatescope {

// Keeps a device's execution context (the instance's CUDA stream) current on the calling
// thread while it lives.
class DeviceScope {
 public:
  virtual ~DeviceScope() = default;
};

// One instance's device. Owned by its runner and used from the runner's one thread.
class Device {
 public:
  virtual ~Device() = default;
  virtual c10::Device torch_device() const = 0;
  // Makes this device's stream current until the scope ends; enter it around every call.
  virtual std::unique_ptr<DeviceScope> Enter() = 0;
  // CPU inputs onto the device (GPU: through pinned staging memory, asynchronously on the
  // instance's stream; CPU: the same tensors). Call inside a scope.
  virtual ModelInputs CopyIn(const ModelInputs& inputs) = 0;
  // Tensors on the device back as CPU tensors; waits for the instance's stream. Call
  // inside a scope.
  virtual NamedTensors CopyOut(const NamedTensors& tensors) = 0;

  // A model's forward over inputs already on this device.
  using Forward = std::function<c10::IValue(const ModelInputs& on_device)>;
  // `forward` over `inputs` (CPU tensors) copied onto this device. Call inside a scope. A
  // GPU instance with CUDA graphs (InstanceSpec::cuda_graphs) pads a batch (inputs that
  // all lead with one batch size) up to its bucket by repeating the first row, so
  // `forward` may see more rows than given, and may replay a graph recorded from an
  // earlier call of the same padded shapes instead of calling `forward`; the result has
  // the given batch's rows either way. A replay's tensors belong to its graph and are
  // rewritten by this device's next Run, so take them out (CopyOut) first.
  virtual c10::IValue Run(const ModelInputs& inputs, const Forward& forward) {
    return forward(CopyIn(inputs));
  }
  // Whether Run may record and replay CUDA graphs (a GPU instance with cuda_graphs whose
  // server was built with them). Decided when the device opens; a recording that fails
  // later turns graphs off for the instance and this false with them, never true again.
  // Any thread.
  virtual bool records_cuda_graphs() const { return false; }
};

// The device `spec` names. The CPU always opens; a GPU only with a CUDA LibTorch and that
// device present (UNAVAILABLE otherwise, saying why).
absl::StatusOr<std::unique_ptr<Device>> OpenDevice(const InstanceSpec& spec);

// The GPUs this process can use (none with a LibTorch built without CUDA).
DeviceInventory VisibleDevices();

}  // namespace gatescope
