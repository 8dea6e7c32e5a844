// Argument validation of gatescope::dgsa_attention.
#include "dgsa_op.h"

#include <ATen/ATen.h>

#include <cmath>

namespace gatescope::ops {

DgsaShape CheckDgsaArgs(const at::Tensor& q_pos, const at::Tensor& k_pos,
                        const at::Tensor& q_neg, const at::Tensor& k_neg,
                        const at::Tensor& v, const at::Tensor& gate,
                        const c10::optional<at::Tensor>& key_padding_mask) {
  TORCH_CHECK(q_pos.dim() == 4, "dgsa_attention: q_pos must be [B, H, Nq, d], got ",
              q_pos.sizes());
  TORCH_CHECK(q_pos.sizes() == q_neg.sizes(), "dgsa_attention: q_neg ", q_neg.sizes(),
              " must match q_pos ", q_pos.sizes());
  TORCH_CHECK(k_pos.dim() == 4 && k_pos.sizes() == k_neg.sizes(),
              "dgsa_attention: k_pos and k_neg must be equal [B, H, Nk, d]");
  TORCH_CHECK(v.dim() == 4, "dgsa_attention: v must be [B, H, Nk, dv]");
  const auto b = q_pos.size(0), h = q_pos.size(1), nq = q_pos.size(2), d = q_pos.size(3);
  const auto nk = k_pos.size(2);
  TORCH_CHECK(k_pos.size(0) == b && k_pos.size(1) == h && k_pos.size(3) == d,
              "dgsa_attention: k ", k_pos.sizes(), " does not fit q ", q_pos.sizes());
  TORCH_CHECK(v.size(0) == b && v.size(1) == h && v.size(2) == nk,
              "dgsa_attention: v ", v.sizes(), " does not fit k ", k_pos.sizes());
  TORCH_CHECK(gate.dim() == 3 && gate.size(0) == b && gate.size(1) == h && gate.size(2) == nq,
              "dgsa_attention: gate must be [B, H, Nq], got ", gate.sizes());
  TORCH_CHECK(nk > 0 && d > 0 && v.size(3) > 0, "dgsa_attention: empty keys or head dim");
  for (const at::Tensor* t : {&k_pos, &q_neg, &k_neg, &v, &gate}) {
    TORCH_CHECK(t->scalar_type() == q_pos.scalar_type(),
                "dgsa_attention: all inputs must share one dtype");
    TORCH_CHECK(t->device() == q_pos.device(), "dgsa_attention: all inputs must share a device");
  }
  if (key_padding_mask.has_value()) {
    const at::Tensor& m = *key_padding_mask;
    TORCH_CHECK(m.dim() == 2 && m.size(0) == b && m.size(1) == nk,
                "dgsa_attention: key_padding_mask must be [B, Nk] = [", b, ", ", nk, "], got ",
                m.sizes());
    TORCH_CHECK(m.scalar_type() == at::kBool || m.scalar_type() == at::kByte,
                "dgsa_attention: key_padding_mask must be bool or uint8, got ",
                m.scalar_type());
    TORCH_CHECK(m.device() == q_pos.device(),
                "dgsa_attention: key_padding_mask must be on q's device (", q_pos.device(),
                "), got ", m.device());
  }
  DgsaShape shape;
  shape.batch_heads = b * h;
  shape.nq = nq;
  shape.nk = nk;
  shape.d = d;
  shape.dv = v.size(3);
  shape.scale = 1.0 / std::sqrt(static_cast<double>(d));
  shape.heads = h;
  return shape;
}

at::Tensor DgsaMaskBytes(const c10::optional<at::Tensor>& key_padding_mask) {
  if (!key_padding_mask.has_value()) return at::Tensor();
  const at::Tensor& m = *key_padding_mask;
  TORCH_INTERNAL_ASSERT(m.scalar_type() == at::kBool || m.scalar_type() == at::kByte);
  static_assert(sizeof(bool) == sizeof(uint8_t), "a bool mask is read as bytes");
  return m.contiguous();
}

const uint8_t* DgsaMaskData(const at::Tensor& mask_bytes) {
  if (!mask_bytes.defined()) return nullptr;
  return static_cast<const uint8_t*>(mask_bytes.data_ptr());
}

}  // namespace gatescope::ops
