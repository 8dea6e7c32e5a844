#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite: ctest (C++ unit tests, GPU-labelled tests
# that skip without a device), pytest on every core (op library, models, the real server and
# client end to end, a real Prometheus on the monitoring rules, the deploy manifests'
# schemas) and the soak alone, then the C++ unit tests again under ASan+UBSan and the
# threaded ones under TSan (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup_deploy_tools.sh
scripts/install_python.sh
scripts/fetch_mnist.sh
scripts/fetch_text_data.sh
scripts/build.sh
status=0
(cd build && ctest --output-on-failure -j2) || status=1
# pytest in one process per core, at most 4 (python3-pytest-xdist; the servers a test starts
# take Torch threads from every core): each test file runs whole on one worker, so its
# module fixtures (its server) start once. Then the soak alone: its latency and throughput
# bounds assume the machine to itself. (docs/benchmarks.md, "pytest on both cores".)
workers=$(nproc)
[ "$workers" -gt 4 ] && workers=4
/usr/bin/python3 -m pytest -q -n "$workers" --dist loadfile models/tests tests/integration \
  tests/deploy || status=1
/usr/bin/python3 -m pytest -q tests/soak || status=1
scripts/sanitize.sh || status=1
exit $status
