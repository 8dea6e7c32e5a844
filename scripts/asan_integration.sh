#!/usr/bin/env bash
# The integration suite (tests/integration, real server and client) against a server built
# with AddressSanitizer + UndefinedBehaviorSanitizer (preset asan, build-asan/). Every
# sanitizer report is written under $REPORTS instead of stderr; the run passes only if the
# suite passes and no report was written. Not part of scripts/test.sh (about 4x slower than
# the release suite); run after scripts/test.sh has set up the machine:
#   scripts/asan_integration.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
REPORTS="${REPORTS:-$PWD/build-asan/sanitizer-reports}"
cmake --preset asan >build.asan.cmake.log 2>&1 || { cat build.asan.cmake.log; exit 1; }
cmake --build build-asan -j"$(nproc)" \
  --target gatescope-server gatescope-client gatescope-perf gatescope_ops
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
export GATESCOPE_BUILD_DIR="$PWD/build-asan"
# Leak checking stays with the unit tests (scripts/sanitize.sh): at the server's exit,
# LeakSanitizer's stop-the-world tracer dies with SIGSEGV in this process (measured: "Tracer
# caught signal 11 ... LeakSanitizer has encountered a fatal error"), which is no finding.
export ASAN_OPTIONS="detect_leaks=0:log_path=$REPORTS/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$REPORTS/ubsan"
status=0
/usr/bin/python3 -m pytest -q tests/integration "$@" || status=1
if compgen -G "$REPORTS/*" >/dev/null; then
  echo "asan_integration: sanitizer reports:"
  head -n 40 "$REPORTS"/*
  status=1
fi
exit $status
