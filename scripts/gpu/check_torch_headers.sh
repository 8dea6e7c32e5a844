#!/usr/bin/env bash
# Compiles the server's CUDA half (server/runtime/*_cuda.cc and cuda_graphs_none.cc) against
# newer LibTorch headers than Debian 12's 1.13, without a GPU and without installing
# anything: Debian unstable's libtorch-cuda-dev (a CUDA build, 2.6 at the time of writing:
# the CUDA graph code's 2.5-2.11 branch) and libtorch-dev (CPU, 2.14: its >= 2.12 branch;
# it ships the CUDA headers too). The packages are downloaded with apt into a scratch
# directory and unpacked there with dpkg -x; the system's apt state is not touched.
# The device machines run LibTorch 2.11, between the two: this catches an API that moved,
# before a scarce device run finds it (docs/gpu.md, "CUDA graphs in the server").
# Usage: scripts/gpu/check_torch_headers.sh [BUILD_DIR]   (default build; needs a configured
# build for the generated protobuf headers and nvcc's runtime headers under /usr/local/cuda)
# Exit: 0 all compiled, 1 a file failed to compile, 2 the packages could not be fetched.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(realpath "${1:-build}")
CUDA_INCLUDE=${CUDA_INCLUDE:-/usr/local/cuda/include}
[ -f "$CUDA_INCLUDE/cuda_runtime_api.h" ] || { echo "no CUDA headers in $CUDA_INCLUDE" >&2; exit 2; }
[ -d "$BUILD/proto/gen" ] || { echo "no generated protobuf headers in $BUILD/proto/gen" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
echo "deb [trusted=yes] http://deb.debian.org/debian sid main contrib" > "$work/sources.list"
APT=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
     -o APT::Sandbox::User=root)
if ! apt-get "${APT[@]}" -qq update >"$work/apt.log" 2>&1; then
  echo "could not read Debian unstable's package lists:" >&2; tail -3 "$work/apt.log" >&2; exit 2
fi
(cd "$work/debs" && apt-get "${APT[@]}" -qq download libtorch-cuda-dev libtorch-dev) \
  >>"$work/apt.log" 2>&1 || { echo "could not download the packages:" >&2; tail -3 "$work/apt.log" >&2; exit 2; }

# The one header a CUDA build of LibTorch generates, as the CMake check target stands it in.
mkdir -p "$work/standin/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$work/standin/c10/cuda/impl/cuda_cmake_macros.h"

failed=0
for deb in "$work"/debs/*.deb; do
  root="$work/$(basename "$deb" .deb)"
  dpkg-deb -x "$deb" "$root"
  inc="$root/usr/include"
  version="$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
  # LibTorch 2.10 and later require C++20; the server builds as C++17 against older ones.
  std=gnu++17
  grep -q 'C++20 or later' "$inc/ATen/ATen.h" 2>/dev/null && std=gnu++20
  for file in server/runtime/gpu_device_cuda.cc server/runtime/cuda_graphs_cuda.cc \
              server/runtime/cuda_graphs_none.cc; do
    # LibTorch's own headers warn under -Wextra; they are system headers here, ours are not.
    if g++ -c -o /dev/null -O2 -std=$std -Wall -Wextra -Werror -I. -I"$BUILD/proto/gen" \
         -isystem "$work/standin" -isystem "$CUDA_INCLUDE" -isystem "$inc" \
         -isystem "$inc/torch/csrc/api/include" "$file" 2>"$work/err"; then
      echo "ok      $version ($std): $file"
    else
      echo "FAILED  $version ($std): $file"; head -30 "$work/err"; failed=1
    fi
  done
done
exit $failed
