#!/usr/bin/env bash
# Compiles the server's CUDA half (server/runtime/*_cuda.cc and cuda_graphs_none.cc) against
# newer LibTorch headers than Debian 12's 1.13, without a GPU and without installing
# anything: Debian unstable's libtorch-cuda-dev (a CUDA build, 2.6 when this was written:
# the CUDA graph code's 2.5-2.11 branch) and libtorch-dev (a CPU build that ships the CUDA
# headers too, 2.14 then: the branch for 2.12 and later). The packages are downloaded with
# apt into a scratch directory and unpacked there with dpkg -x; the system's apt state is
# not touched. The device machines run LibTorch 2.11, between the two: this catches an API
# that moved before a scarce device run finds it (docs/gpu.md, "CUDA graphs in the server").
# Each file must compile with -Wall -Wextra -Werror, and every LibTorch header it reads
# must come from the unpacked package, never from the system's 1.13 (checked in the
# compiler's list of headers read).
# Usage: scripts/gpu/check_torch_headers.sh [BUILD_DIR]   (default build: a configured build
# for the generated protobuf headers; CUDA_INCLUDE (default /usr/local/cuda/include) for
# nvcc's runtime headers)
# Exit: 0 every file compiled against both; 1 one did not, or read a system LibTorch header;
# 2 the check could not run (no CUDA or generated headers, packages not fetched or unpacked,
# a package without the headers checked for).
set -euo pipefail
BUILD=$(realpath -m "${1:-build}")  # relative to the caller's directory; checked below
cd "$(dirname "$0")/../.."
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

# The one header a CUDA build of LibTorch generates, as the CMake check target stands it in;
# searched after the package's own, so that a package that ships it wins.
mkdir -p "$work/standin/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$work/standin/c10/cuda/impl/cuda_cmake_macros.h"

failed=0
for deb in "$work"/debs/*.deb; do
  root="$work/$(basename "$deb" .deb)"
  dpkg-deb -x "$deb" "$root" || { echo "could not unpack $deb" >&2; exit 2; }
  inc="$root/usr/include"
  version="$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
  for header in ATen/ATen.h ATen/cuda/CUDAGraph.h c10/cuda/CUDACachingAllocator.h \
                c10/cuda/CUDAStream.h torch/csrc/api/include/torch/version.h; do
    [ -f "$inc/$header" ] || { echo "$version has no $header" >&2; exit 2; }
  done
  # LibTorch 2.14 requires C++20 (its ATen.h says so); the server builds as C++17 against
  # older ones.
  std=gnu++17
  if grep -q 'C++20 or later' "$inc/ATen/ATen.h"; then std=gnu++20; fi
  for file in server/runtime/gpu_device_cuda.cc server/runtime/cuda_graphs_cuda.cc \
              server/runtime/cuda_graphs_none.cc; do
    # LibTorch's own headers warn under -Wextra; they are system headers here, ours are not.
    # -O0: what is checked is the API; with optimisation GCC 12 warns of a false overflow in
    # LibTorch 2.6's inlined reference counting (-Wstringop-overflow), which the regular
    # build against 1.13 does not meet.
    if g++ -c -o /dev/null -O0 -std=$std -Wall -Wextra -Werror -MD -MF "$work/deps" \
         -I. -I"$BUILD/proto/gen" -isystem "$CUDA_INCLUDE" -isystem "$inc" \
         -isystem "$inc/torch/csrc/api/include" -isystem "$work/standin" \
         "$file" 2>"$work/err"; then
      # Whole paths only: the package's own lie under $work/.../usr/include.
      grep -Eo '(^| )/usr/include/(ATen|c10|torch|caffe2)/[^ ]*' "$work/deps" > "$work/system" || true
      if [ -s "$work/system" ]; then
        echo "FAILED  $version ($std): $file read the system's LibTorch headers:"
        head -3 "$work/system"; failed=1
      else
        echo "ok      $version ($std): $file"
      fi
    else
      echo "FAILED  $version ($std): $file"; head -30 "$work/err"; failed=1
    fi
  done
done
exit $failed
