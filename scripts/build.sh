#!/usr/bin/env bash
# Configures and builds everything into ./build (Release). nvcc, when present, compiles
# the CUDA kernels for sm_90. Usage: scripts/build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-DCMAKE_BUILD_TYPE=Release)
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake -S . -B build "${args[@]}" "$@" >build.cmake.log 2>&1 || { cat build.cmake.log; exit 1; }
cmake --build build -j"$(nproc)"
