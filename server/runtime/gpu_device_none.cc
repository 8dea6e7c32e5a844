// The GPU half of the device seam for a LibTorch built without CUDA (Debian's).
#include "absl/strings/str_cat.h"
#include "server/runtime/gpu_device.h"

namespace gatescope {
namespace {

constexpr char kNoCuda[] = "this server's LibTorch was built without CUDA";

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> OpenGpuDevice(const InstanceSpec& spec) {
  return absl::UnavailableError(absl::StrCat(DeviceName(spec), " cannot be used: ", kNoCuda));
}

DeviceInventory VisibleGpus() { return {0, kNoCuda}; }

}  // namespace gatescope
