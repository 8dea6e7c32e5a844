// Shapes, raw-pointer arguments and the bilinear corner rule of the multi-scale deformable
// attention forward (gatescope::ms_deform_attn), shared by the CPU kernel, the CUDA kernel
// and their tests. Torch-free and CUDA-free (under nvcc the corner rule is also a device
// function, so both backends use the same arithmetic).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GS_MSDA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GS_MSDA_HOST_DEVICE inline
#endif

namespace gatescope::ops {

// All tensors are dense, row-major (contiguous):
//   value:              [batch, spatial, heads, channels]; spatial = sum_l H_l * W_l, level l
//                       occupying rows [level_start[l], level_start[l] + H_l * W_l) in
//                       row-major (y, x) order
//   spatial_shapes:     int64 [levels, 2] = (H_l, W_l)
//   level_start:        int64 [levels]
//   sampling_locations: [batch, queries, heads, levels, points, 2], normalised (x, y);
//                       (0, 0) is the top-left corner of the map, (1, 1) the bottom-right
//   attention_weights:  [batch, queries, heads, levels, points]
//   out:                [batch, queries, heads, channels] (= [batch, queries, heads * channels])
// out[n, q, m, :] = sum_{l, p} attention_weights[n, q, m, l, p] *
//                   bilinear(value level l of batch n, head m; sampling_locations[n, q, m, l, p])
// where bilinear() is grid_sample(mode="bilinear", padding_mode="zeros",
// align_corners=False) at grid 2 * loc - 1: pixel coordinates x * W - 0.5, y * H - 0.5, and
// each of the four neighbouring pixels that lies outside the map contributes 0.
struct MsDeformShape {
  int64_t batch = 0;
  int64_t spatial = 0;
  int64_t heads = 0;
  int64_t channels = 0;
  int64_t queries = 0;
  int64_t levels = 0;
  int64_t points = 0;
};

// Where the pointers live (host for the CPU kernel, device for the CUDA kernel) is the
// caller's business; spatial_shapes and level_start live with the other tensors.
template <typename T>
struct MsDeformPointers {
  const T* value = nullptr;
  const int64_t* spatial_shapes = nullptr;
  const int64_t* level_start = nullptr;
  const T* sampling_locations = nullptr;
  const T* attention_weights = nullptr;
  T* out = nullptr;
};

// The four bilinear neighbours of one sampling point in one level: pixel[k] is the index
// y * W + x inside the level, or -1 when that neighbour lies outside the map (then
// weight[k] is meaningless). Order: (y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1).
template <typename Acc>
struct MsDeformCorners {
  int64_t pixel[4];
  Acc weight[4];
};

// Fills `c` for the normalised location (loc_x, loc_y) in an h x w map. Returns false, with
// every pixel -1, when no neighbour lies inside (this includes non-finite locations and
// empty maps); the point then adds only MsDeformRejectedTerm.
template <typename Acc>
GS_MSDA_HOST_DEVICE bool MsDeformBilinear(Acc loc_x, Acc loc_y, int64_t h, int64_t w,
                                          MsDeformCorners<Acc>& c) {
  const Acc x = loc_x * static_cast<Acc>(w) - Acc(0.5);
  const Acc y = loc_y * static_cast<Acc>(h) - Acc(0.5);
  // The range test comes before any cast to an integer: it also rejects NaN and values far
  // outside the map, whose conversion would overflow.
  if (!(x > Acc(-1) && y > Acc(-1) && x < static_cast<Acc>(w) && y < static_cast<Acc>(h))) {
    for (int k = 0; k < 4; ++k) c.pixel[k] = -1;
    return false;
  }
  // floor without <cmath> on either side: x + 1 > 0, so truncation gives floor(x) + 1,
  // unless rounding of x + 1 reached the next integer (x just below it), which the
  // comparison undoes.
  int64_t x0 = static_cast<int64_t>(x + Acc(1)) - 1;
  int64_t y0 = static_cast<int64_t>(y + Acc(1)) - 1;
  if (static_cast<Acc>(x0) > x) --x0;
  if (static_cast<Acc>(y0) > y) --y0;
  const Acc fx = x - static_cast<Acc>(x0), fy = y - static_cast<Acc>(y0);
  const Acc gx = Acc(1) - fx, gy = Acc(1) - fy;
  const bool x0_in = x0 >= 0, x1_in = x0 + 1 < w, y0_in = y0 >= 0, y1_in = y0 + 1 < h;
  c.pixel[0] = (y0_in && x0_in) ? y0 * w + x0 : -1;
  c.pixel[1] = (y0_in && x1_in) ? y0 * w + x0 + 1 : -1;
  c.pixel[2] = (y1_in && x0_in) ? (y0 + 1) * w + x0 : -1;
  c.pixel[3] = (y1_in && x1_in) ? (y0 + 1) * w + x0 + 1 : -1;
  c.weight[0] = gy * gx;
  c.weight[1] = gy * fx;
  c.weight[2] = fy * gx;
  c.weight[3] = fy * fx;
  return true;
}

// What a point rejected by MsDeformBilinear adds to every channel: 0, or NaN when its
// location or its attention weight `a` is not finite. This keeps the reference's
// propagation: grid_sample gives NaN at a non-finite location, and the reference then
// multiplies the (zero) sample of an outside point by its weight, 0 * inf = NaN.
template <typename Acc>
GS_MSDA_HOST_DEVICE Acc MsDeformRejectedTerm(Acc loc_x, Acc loc_y, Acc a) {
  return a * Acc(0) + (loc_x - loc_x) + (loc_y - loc_y);
}

}  // namespace gatescope::ops
