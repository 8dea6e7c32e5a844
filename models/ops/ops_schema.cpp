// Schema of the gatescope op library, declared once; backends register in their own files.
#include <torch/library.h>

TORCH_LIBRARY(gatescope, m) {
  // key_padding_mask: optional [B, Nk] bool or uint8, nonzero = visible key (as in
  // dar_attention); hidden keys get zero weight in both branches, a row that sees no key is
  // 0. Appended with a default so 6-argument callers (shipped archives) are unchanged.
  // See dgsa_shape.h.
  m.def(
      "dgsa_attention(Tensor q_pos, Tensor k_pos, Tensor q_neg, Tensor k_neg, Tensor v, "
      "Tensor gate, Tensor? key_padding_mask=None) -> Tensor");
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
  // Multi-scale deformable attention (Deformable DETR layout), forward only: no autograd
  // kernel, so the output carries no gradient (train with the eager grid_sample reference,
  // gatescope/attention/ms_deform.py). value [N, S, M, D], spatial_shapes int64 [L, 2],
  // level_start_index int64 [L], sampling_locations [N, Lq, M, L, P, 2] (normalised x, y),
  // attention_weights [N, Lq, M, L, P] -> [N, Lq, M * D]. See ms_deform_shape.h.
  m.def(
      "ms_deform_attn(Tensor value, Tensor spatial_shapes, Tensor level_start_index, "
      "Tensor sampling_locations, Tensor attention_weights) -> Tensor");
  // Pairwise logit gating (PLuG): softmax_j(scale q.k (1 + G)) v with the head-shared gate
  // G = tanh((w_a r + b_a)(w_b r + b_b)), r = gate_scale q_gate.k_gate; q, k [B, H, N|M, d],
  // v [B, H, M, dv], q_gate, k_gate [B, N|M, dg], gml_weight [2, 1], gml_bias [2] ->
  // [B, H, N, dv]. Forward only (no autograd kernel). See plug_shape.h.
  m.def(
      "plug_attention(Tensor q, Tensor k, Tensor v, Tensor q_gate, Tensor k_gate, "
      "Tensor gml_weight, Tensor gml_bias, float scale, float gate_scale, "
      "bool tanh_gate=True) -> Tensor");
}
