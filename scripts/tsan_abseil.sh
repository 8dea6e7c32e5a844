#!/usr/bin/env bash
# Builds Abseil from Debian's own source package (the version of the installed libabsl-dev)
# with ThreadSanitizer into ~/.cache/gatescope/abseil-tsan, for the tsan preset. Debian's
# binary Abseil is not instrumented, so TSan would not see absl::Mutex synchronise and
# would call every guarded access a race. Like an installed package it is built once per
# machine: when the prefix holds this version it returns at once, without apt. The source
# comes from the Debian archive the machine already uses (its deb-src twin).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$HOME/.cache/gatescope/abseil-tsan
version=$(dpkg-query -W -f='${source:Version}' libabsl-dev)
if [ -f "$prefix/lib/cmake/absl/abslConfig.cmake" ] && [ "$(cat "$prefix/VERSION" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
rm -rf "$prefix"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/apt/lists/partial"
# The machine's own Debian mirrors, as source repositories.
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sed 's/^Types: deb$/Types: deb-src/' "$f" >"$work/apt/$(basename "$f")"
done
if [ -f /etc/apt/sources.list ]; then
  sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$work/apt/src.list"
fi
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/apt"
          -o "Dir::State::Lists=$work/apt/lists" -o Debug::NoDropPrivs=1)
apt-get "${apt_opts[@]}" -qq update
(cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only "abseil=$version" >/dev/null)
(cd "$work" && dpkg-source -x --no-check ./*.dsc abseil >/dev/null)
cmake -S "$work/abseil" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_STANDARD=17 \
  -DABSL_PROPAGATE_CXX_STD=ON -DBUILD_TESTING=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_INSTALL_PREFIX="$prefix" >"$work/configure.log"
cmake --build "$work/build" -j"$(nproc)" >"$work/build.log"
cmake --install "$work/build" >/dev/null
echo "$version" >"$prefix/VERSION"
echo "tsan_abseil: Abseil $version with ThreadSanitizer in $prefix"
