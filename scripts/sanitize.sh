#!/usr/bin/env bash
# The C++ unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (preset asan, in
# build-asan/), and the threaded ones (label concurrency: batcher, model instance,
# repository, poller) under ThreadSanitizer (preset tsan, in build-tsan/, against an
# Abseil built with TSan by scripts/tsan_abseil.sh). Part of scripts/test.sh; usage:
# scripts/sanitize.sh [asan] [tsan] (default both).
# The asan build keeps line tables only (-gline-tables-only: its reports still name
# function, file and line, inlined frames included) and links with lld (Debian lld-14): 14 %
# less build time and a quarter less disk (docs/benchmarks.md, "Sanitizer builds"). The
# tsan build keeps full debug information, since its suppressions name LibTorch's inlined
# reference-count frames by qualified names that line tables do not hold; lld saved it
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(asan tsan)
status=0
for kind in "${kinds[@]}"; do
  [ "$kind" = tsan ] && scripts/tsan_abseil.sh
  if [ "$kind" = asan ] && [ ! -x /usr/lib/llvm-14/bin/ld.lld ]; then
    echo "sanitize: the asan preset links with lld; run scripts/setup.sh (it installs lld-14)" >&2
    exit 1
  fi
  cmake --preset "$kind" >"build.$kind.cmake.log" 2>&1 || { cat "build.$kind.cmake.log"; exit 1; }
  cmake --build --preset "$kind" -j"$(nproc)"
  ctest --preset "$kind" || status=1
done
exit $status
