// libFuzzer harness: any bytes as an encoded image, for a fixed-size gray model (scaled
// JPEG decoding, resize) and an RGB model taking any size up to 64k pixels (kept small so
// each input decodes in microseconds). Decoding must return a status, never crash, leak
// or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/preprocess/image.h"

namespace {

gatescope::InputSpec Spec(bool any_size) {
  gatescope::InputSpec spec;
  for (int64_t d : {any_size ? 3 : 1, 28, 28}) spec.add_shape(d);
  spec.set_color(any_size ? "rgb" : "gray");
  spec.set_scale(1.f / 255.f);
  for (int c = 0; c < (any_size ? 3 : 1); ++c) {
    spec.add_mean(0.5f);
    spec.add_std(0.25f);
  }
  spec.set_any_size(any_size);
  spec.set_max_pixels(1 << 16);
  return spec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gatescope::InputSpec gray = Spec(false);
  static const gatescope::InputSpec rgb_any = Spec(true);
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gatescope::ImageSize out;
  (void)gatescope::DecodeImage(bytes, gray, &out);
  (void)gatescope::DecodeImage(bytes, rgb_any, &out);
  return 0;
}
