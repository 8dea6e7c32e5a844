// Parallel split of an attention forward into (head slice, block of query rows) tasks,
// shared by the CPU backends. Runs on ATen's intra-op pool (OpenMP here); `rows_fn` must be
// safe to call concurrently for disjoint (slice, row range) pairs.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

namespace gatescope::ops {

inline constexpr int64_t kRowBlock = 32;

// Calls rows_fn(slice, row_begin, row_end) for every slice in [0, slices) and every block
// of at most kRowBlock rows in [0, rows).
template <typename F>
void ForEachRowBlock(int64_t slices, int64_t rows, const F& rows_fn) {
  const int64_t row_blocks = (rows + kRowBlock - 1) / kRowBlock;
  at::parallel_for(0, slices * row_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t slice = task / row_blocks;
      const int64_t r0 = (task % row_blocks) * kRowBlock;
      rows_fn(slice, r0, std::min(rows, r0 + kRowBlock));
    }
  });
}

}  // namespace gatescope::ops
