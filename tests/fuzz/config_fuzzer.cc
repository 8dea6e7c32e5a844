// libFuzzer harness: any text as a model's gatescope.json (then the task it names) and as
// its config.pbtxt (then the serving plan over it): both parsers are fed by files a model
// author writes, and must end in a status, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/config/model_config.h"
#include "server/config/serving_config.h"
#include "server/tasks/task_registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gatescope;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = ParseModelConfig(text);
  if (config.ok()) (void)CreateTask(*config, TaskOptions{});
  auto serving = ParseServingConfig(text);
  if (serving.ok()) {
    DeviceInventory devices;
    (void)MakeServingPlan(ServingDefaults{}, 64, *serving, devices);
  }
  return 0;
}
