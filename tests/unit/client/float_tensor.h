// A gatescope.v1.Tensor of float32 values, for the client's tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gatescope/v1/inference.pb.h"

namespace gatescope::client {

inline v1::Tensor FloatTensor(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  v1::Tensor t;
  t.set_dtype(v1::Tensor::FLOAT32);
  for (int64_t d : shape) t.add_shape(d);
  t.set_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  return t;
}

}  // namespace gatescope::client
