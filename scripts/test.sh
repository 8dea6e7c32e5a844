#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite: ctest (C++ unit, integration, GPU-labelled
# tests that skip without a device) and pytest (op library and models).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/install_python.sh
scripts/fetch_mnist.sh
scripts/build.sh
status=0
(cd build && ctest --output-on-failure -j2) || status=1
/usr/bin/python3 -m pytest -q models/tests tests/integration || status=1
exit $status
