#include "server/api/tensor_proto.h"

#include <ATen/core/Tensor.h>

namespace gatescope {
namespace {

void Copy(const at::Tensor& t, ::gatescope::v1::Tensor::DType dtype, ::gatescope::v1::Tensor* out) {
  out->set_dtype(dtype);
  out->clear_shape();
  for (int64_t d : t.sizes()) out->add_shape(d);
  out->set_data(static_cast<const char*>(t.data_ptr()), t.nbytes());
}

}  // namespace

void ToFloatProto(const at::Tensor& t, ::gatescope::v1::Tensor* out) {
  Copy(t.to(at::kFloat).contiguous(), ::gatescope::v1::Tensor::FLOAT32, out);
}

void ToUint8Proto(const at::Tensor& t, ::gatescope::v1::Tensor* out) {
  Copy(t.to(at::kByte).contiguous(), ::gatescope::v1::Tensor::UINT8, out);
}

}  // namespace gatescope
