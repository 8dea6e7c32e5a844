#include "server/runtime/device.h"

#include "server/runtime/gpu_device.h"

namespace gatescope {
namespace {

class CpuDevice final : public Device {
 public:
  c10::Device torch_device() const override { return c10::Device(c10::kCPU); }
  std::unique_ptr<DeviceScope> Enter() override { return std::make_unique<DeviceScope>(); }
  ModelInputs CopyIn(const ModelInputs& inputs) override { return inputs; }
  NamedTensors CopyOut(const NamedTensors& tensors) override { return tensors; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> OpenDevice(const InstanceSpec& spec) {
  if (spec.kind == InstanceSpec::Kind::kGpu) return OpenGpuDevice(spec);
  return std::unique_ptr<Device>(std::make_unique<CpuDevice>());
}

DeviceInventory VisibleDevices() { return VisibleGpus(); }

}  // namespace gatescope
