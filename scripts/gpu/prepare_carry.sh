#!/usr/bin/env bash
# Prepares, on a Debian 12 machine, what scripts/gpu/gpu_check.sh needs on the device machine
# (CUDA + PyTorch, no network, no C++ dependencies of the server): writes .gpu_carry/
# (ignored by git; name it in the device run's `carry`) holding
#   sysroot.tar.xz            Debian 12's gRPC, protobuf (protoc, grpc_cpp_plugin), Abseil,
#                             prometheus-cpp, OpenCV core + imgproc, libpng, libjpeg-turbo,
#                             jemalloc, SentencePiece, OpenSSL, Boost (only the headers the
#                             server includes), nlohmann-json, CLI11, GoogleTest, pkgconf:
#                             unpacked with dpkg -x into a prefix there, never into /
#   torchscript_reference.pt  inputs and outputs of every shipped model under Debian's torch
#   inputs/                   encoded images and texts the serving check sends
#   models/                   the model repository, or the part of it --models names
# The carry limit of a device run is 64 MiB including the working tree, which the shipped
# models alone exceed: --models picks the ones to take in this run.
# Usage: scripts/gpu/prepare_carry.sh [--models first|rest|all|NAME,NAME...] [--artifacts FILE]
# --artifacts: the artifacts.tar.xz an earlier device run wrote (server, perf tool, op library,
# kernel tests built there), for `gpu_check.sh facts reuse compat serve`, which builds nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODELS=first
ARTIFACTS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --models) MODELS="$2"; shift 2 ;;
    --artifacts) ARTIFACTS=$(realpath "$2"); shift 2 ;;
    *) echo "usage: $0 [--models first|rest|all|NAME,...] [--artifacts FILE]" >&2; exit 2 ;;
  esac
done
OUT=.gpu_carry
PY=/usr/bin/python3
grep -qx '/.gpu_carry/' .git/info/exclude 2>/dev/null || echo '/.gpu_carry/' >> .git/info/exclude
rm -rf "$OUT" && mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Development packages (headers, CMake packages, tools) and the runtime libraries they and
# OpenCV core need. libopencv-dev holds only OpenCV's CMake package: its other modules are
# not carried (imgcodecs alone pulls in GDAL); gpu_check.sh stands in for their files.
PACKAGES=(
  libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc protobuf-compiler
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 libabsl-dev libabsl20220623
  libc-ares-dev libc-ares2 libre2-dev libre2-9 libssl-dev libssl3 zlib1g-dev zlib1g
  prometheus-cpp-dev libprometheus-cpp-core1.0 libcivetweb-dev libcivetweb1
  libcurl4-openssl-dev libcurl4 libcli11-dev nlohmann-json3-dev
  libboost1.74-dev libopencv-dev libopencv-core-dev libopencv-imgproc-dev libopencv-core406
  libopencv-imgproc406 libtbb-dev libtbb12 libtbbmalloc2 libpng-dev libpng16-16
  libjpeg62-turbo-dev libjpeg62-turbo libjemalloc-dev libjemalloc2 libsentencepiece-dev
  libsentencepiece0 libgtest-dev pkgconf pkgconf-bin libpkgconf3 libopenblas0-pthread
  libgfortran5 libquadmath0 libx11-6 libx11-data libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
  libglx0 libglvnd0
)
(cd "$work" && apt-get download -q "${PACKAGES[@]}" >/dev/null 2>&1) || {
  echo "prepare_carry: apt-get download failed (run apt-get update first)" >&2; exit 1; }
root="$work/sysroot"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$root"; done

# What the device build never uses: documentation and static libraries (GoogleTest's are
# the only ones linked), and every Boost header the server's HTTP code does not include.
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian"
find "$root" -name '*.a' ! -name 'libgtest*.a' ! -name 'libgmock*.a' -delete
boost_used=$(g++ -std=c++17 -M -MG -I. server/http/http_server.cc 2>/dev/null | tr ' \\' '\n\n' |
             grep '^/usr/include/boost/' | sed 's|^/usr/include/||' | sort -u)
[ -n "$boost_used" ] || { echo "prepare_carry: no Boost header found (is libboost-dev installed?)" >&2; exit 1; }
mkdir -p "$work/boost_keep"
printf '%s\n' $boost_used | tar -C "$root/usr/include" -cf - -T - | tar -C "$work/boost_keep" -xf -
rm -rf "$root/usr/include/boost" && mv "$work/boost_keep/boost" "$root/usr/include/boost"
# A run that reuses built binaries needs the libraries only.
if [ -n "$ARTIFACTS" ]; then
  rm -rf "$root/usr/include" "$root/usr/bin" "$root/usr/share" \
    "$root/usr/lib/x86_64-linux-gnu/cmake" "$root/usr/lib/x86_64-linux-gnu/pkgconfig"
  find "$root" -name '*.a' -delete
fi
XZ_OPT="-6 -T0" tar -C "$root" -cJf "$OUT/sysroot.tar.xz" .

# Inputs for the serving check: Fashion-MNIST items, Colin27 slices, detection scenes, texts.
mkdir -p "$OUT/inputs"
$PY models/tools/write_fashion_mnist_png.py --out "$OUT/inputs/fmnist" --count 8 >/dev/null
$PY models/tools/write_colin27_png.py --out "$work/colin27" >/dev/null
mkdir -p "$OUT/inputs/colin27"
ls "$work"/colin27/z*.png | grep -v labels | head -4 | xargs -I{} cp {} "$OUT/inputs/colin27/"
$PY models/tools/write_detection_scenes_png.py --out "$OUT/inputs/scenes" --count 4 >/dev/null
$PY - "$OUT/inputs/texts" <<'EOF'
import pathlib, sys
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True)
texts = ["a small domesticated feline", "the act of moving quickly from one place to another",
         "Subject: cheap meds online!!! click here to claim your prize now",
         "Subject: meeting notes\nHi all, attached are the notes from Tuesday's review. " * 6,
         "caf\u00e9 au lait \U0001F600 with a long tail of words " * 20]
for i, t in enumerate(texts):
    (out / f"{i:02d}.txt").write_text(t, encoding="utf-8")
EOF

$PY scripts/gpu/torchscript_reference.py --out "$OUT" >/dev/null

mkdir -p "$OUT/models"
case "$MODELS" in
  all) names=$(ls -d model_repository/*/ | xargs -n1 basename) ;;
  # One served model per fused op and task within the carry limit, then the rest.
  first) names="dgvit_fmnist vit_fmnist diffvit_fmnist darvit_fmnist deit_fmnist
                plug_deit_fmnist plug_detr_scenes pvt_gdla_colin27 dgt_wordnet" ;;
  rest) names="detr_scenes pvt_la_colin27 transformer_wordnet difftransformer_wordnet dgt_spam
               transformer_spam difftransformer_spam" ;;
  *) names=$(echo "$MODELS" | tr ',' ' ') ;;
esac
for n in $names; do cp -r "model_repository/$n" "$OUT/models/"; done
# The request path's stand-in (benchmarks/bench_server_floor.py: one 784 x 10 product per
# image, 31 KB), batched like the shipped classifiers: serve_check.py --floor serves it as the
# ceiling of what the server and gatescope-perf reach on the device machine's CPUs.
PYTHONPATH=models:benchmarks $PY -c 'import pathlib, sys, bench_server_floor as f
f.write_repository(pathlib.Path(sys.argv[1]))' "$OUT/models"
printf 'max_batch_size: 32\ndynamic_batching {\n  max_queue_delay_microseconds: 200\n}\n' \
  >"$OUT/models/floor_fmnist/config.pbtxt"
[ -z "$ARTIFACTS" ] || cp "$ARTIFACTS" "$OUT/artifacts.tar.xz"
du -sh "$OUT" "$OUT"/* | sed 's/^/prepare_carry: /'
# What a device run sends: this folder and the working tree without the model repository,
# checkpoints and pictures, which stay behind (docs/gpu.md).
tree=$(git ls-files -z --cached --others --exclude-standard -- . ':!model_repository' \
         ':!models/checkpoints' ':!docs/images' | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
total=$(( (tree + $(du -sb "$OUT" | cut -f1)) / 1048576 ))
echo "prepare_carry: ${total} MiB with the working tree (a device run takes at most 64)"
[ "$total" -lt 64 ] || { echo "prepare_carry: too large: carry fewer models" >&2; exit 1; }
