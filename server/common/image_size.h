// Height and width of an input image.
#pragma once

#include <cstdint>

namespace gatescope {

struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
  bool operator==(const ImageSize& o) const { return height == o.height && width == o.width; }
};

}  // namespace gatescope
