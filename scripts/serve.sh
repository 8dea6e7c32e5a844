#!/usr/bin/env bash
# Sets up, builds and serves the shipped model repository: gRPC on 127.0.0.1:8001,
# Prometheus metrics on :8002. Extra arguments go to gatescope-server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/server/gatescope-server --model_repository=model_repository \
  --ops_library=build/models/ops/libgatescope_ops.so "$@"
