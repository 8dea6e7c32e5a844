// Schema of the gatescope op library, declared once; backends register in their own files.
#include <torch/library.h>

TORCH_LIBRARY(gatescope, m) {
  m.def(
      "dgsa_attention(Tensor q_pos, Tensor k_pos, Tensor q_neg, Tensor k_neg, Tensor v, "
      "Tensor gate) -> Tensor");
  // Returns (out [B, H, Nq, dv], vigilance-crossing fraction [B, H]); see dar_shape.h.
  m.def(
      "dar_attention(Tensor q, Tensor k, Tensor v, Tensor? key_padding_mask=None, "
      "bool causal=False, float lam=0.0, float rho=0.5, float alpha=8.0, float beta=0.0, "
      "int steps=1) -> (Tensor, Tensor)");
  // Gated differential linear attention, O(N); gate 0 sigmoid, 1 silu, 2 none. See
  // gdla_shape.h.
  m.def(
      "gdla_attention(Tensor q, Tensor k, Tensor v, Tensor g, Tensor lam, "
      "Tensor? norm_weight=None, float eps=1e-5, int gate=0) -> Tensor");
}
