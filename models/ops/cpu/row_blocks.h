// Parallel split of an attention forward into (head slice, block of query rows or key
// tokens) tasks, shared by the CPU backends. Runs on ATen's intra-op pool (OpenMP here); the
// callback must be safe to call concurrently for disjoint (slice, range) pairs.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

namespace gatescope::ops {

inline constexpr int64_t kRowBlock = 32;

// Calls fn(slice, begin, end) for every slice in [0, slices) and every block of at most
// `block` consecutive items in [0, items). The split depends only on the sizes, not on the
// thread count.
template <typename F>
void ForEachBlock(int64_t slices, int64_t items, int64_t block, const F& fn) {
  const int64_t blocks = (items + block - 1) / block;
  at::parallel_for(0, slices * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t slice = task / blocks;
      const int64_t i0 = (task % blocks) * block;
      fn(slice, i0, std::min(items, i0 + block));
    }
  });
}

// Calls rows_fn(slice, row_begin, row_end) for every slice in [0, slices) and every block
// of at most kRowBlock rows in [0, rows).
template <typename F>
void ForEachRowBlock(int64_t slices, int64_t rows, const F& rows_fn) {
  ForEachBlock(slices, rows, kRowBlock, rows_fn);
}

}  // namespace gatescope::ops
