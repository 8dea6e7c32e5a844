#!/usr/bin/env bash
# Installs every build and run dependency from Debian 12's archive. Idempotent: when all
# packages are present it returns in about a second without touching apt. The Python
# package itself (models/) is installed by scripts/install_python.sh.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  libtorch-dev python3-torch libopenblas0-pthread
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libopencv-dev libpng-dev libjpeg62-turbo-dev libabsl-dev prometheus-cpp-dev libcli11-dev
  libboost-dev libssl-dev openssl libjemalloc-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev lld-14 dpkg-dev
  python3-numpy python3-pytest python3-pytest-xdist python3-grpcio python3-protobuf
  python3-pip python3-setuptools python3-wheel
  python3-sentencepiece libsentencepiece-dev python3-sklearn
  chromium chromium-driver python3-selenium
  dataset-fashion-mnist mricron-data wordnet-base
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
