#include "client/map_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "client/json_writer.h"
#include "client/npy_writer.h"
#include "client/panel.h"

namespace gatescope::client {

using ::gatescope::v1::Tensor;

absl::Status CheckMap(const Tensor& t, int rank, const std::string& name) {
  const int64_t n = NpyElements({t.shape().begin(), t.shape().end()});
  if (t.dtype() != Tensor::FLOAT32 || t.shape_size() != rank || n < 0 ||
      static_cast<uint64_t>(n) * 4 != t.data().size()) {
    return absl::DataLossError("malformed " + name + " map in the response");
  }
  return absl::OkStatus();
}

absl::StatusOr<StackedMaps> StackLayers(const TensorList& layers, const std::string& name,
                                        int rank) {
  StackedMaps out;
  for (const Tensor& t : layers) {
    if (absl::Status st = CheckMap(t, rank, name); !st.ok()) return st;
    const std::vector<int64_t> s(t.shape().begin(), t.shape().end());
    if (out.shape.empty()) {
      out.shape = {static_cast<int64_t>(layers.size())};
      out.shape.insert(out.shape.end(), s.begin(), s.end());
    } else if (!std::equal(s.begin(), s.end(), out.shape.begin() + 1)) {
      return absl::DataLossError(name + " maps differ in shape across layers");
    }
    out.bytes += t.data();
  }
  return out;
}

std::string TensorJson(const Tensor& t) {
  std::vector<float> data(t.data().size() / sizeof(float));
  std::memcpy(data.data(), t.data().data(), data.size() * sizeof(float));
  const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  size_t pos = 0;
  std::function<std::string(size_t)> nest = [&](size_t dim) -> std::string {
    std::string out = "[";
    for (int64_t i = 0; i < shape[dim]; ++i) {
      if (i) out += ",";
      if (dim + 1 == shape.size()) {
        out += pos < data.size() ? JsonNumber(data[pos]) : "null";
        ++pos;
      } else {
        out += nest(dim + 1);
      }
    }
    return out + "]";
  };
  return shape.empty() ? "[]" : nest(0);
}

std::string TensorListJson(const TensorList& ts) {
  std::string out = "[";
  for (int i = 0; i < ts.size(); ++i) out += (i ? "," : "") + TensorJson(ts.Get(i));
  return out + "]";
}

cv::Mat GridMat(const Tensor& t) {
  cv::Mat m(static_cast<int>(t.shape(0)), static_cast<int>(t.shape(1)), CV_32FC1);
  std::memcpy(m.ptr<float>(), t.data().data(), t.data().size());
  return m;
}

cv::Mat HeadMeanMat(const Tensor& t) {
  std::vector<float> v(t.data().size() / sizeof(float));
  std::memcpy(v.data(), t.data().data(), t.data().size());
  return HeadMean(v.data(), static_cast<int>(t.shape(0)), static_cast<int>(t.shape(1)),
                  static_cast<int>(t.shape(2)));
}

cv::Mat GateRowMat(const Tensor& t) {
  const int n = static_cast<int>(t.shape(1));
  const int side = static_cast<int>(std::lround(std::sqrt(std::max(0, n - 1))));
  if (t.shape(0) < 1 || side * side != n - 1 || side == 0) return {};
  cv::Mat m(side, side, CV_32FC1);
  std::memcpy(m.ptr<float>(), t.data().data() + sizeof(float), sizeof(float) * (n - 1));
  return m;
}

}  // namespace gatescope::client
