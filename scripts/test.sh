#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite: ctest (C++ unit tests, GPU-labelled tests
# that skip without a device), pytest (op library, models, the real server and client end to
# end, a real Prometheus on the monitoring rules, the deploy manifests' schemas), then the
# C++ unit tests again under ASan+UBSan and the threaded ones under TSan (scripts/sanitize.sh).
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
/usr/bin/python3 -m pytest -q models/tests tests/integration tests/deploy tests/soak || status=1
scripts/sanitize.sh || status=1
exit $status
