#!/usr/bin/env bash
# Installs the gatescope Python package (models/, pyproject.toml) for Debian's
# /usr/bin/python3, editable, from this checkout: imports of `gatescope` then run this
# checkout's models/gatescope/ in place. Idempotent: when `gatescope` already resolves to
# this checkout it returns at once, without pip. Otherwise pip builds the editable wheel
# offline from Debian's setuptools and wheel (setup.sh installs them): no index, no
# dependency resolution (torch, numpy and protobuf are Debian's), no build isolation.
# One checkout is installed at a time; installing another one replaces it (the tests check
# that they import their own checkout's package).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd -P)
want="$here/models/gatescope/__init__.py"
# -I: ignore PYTHONPATH and the working directory, so this sees the installed state.
found=$(cd / && /usr/bin/python3 -I -c 'import importlib.util, os
spec = importlib.util.find_spec("gatescope")
print(os.path.realpath(spec.origin) if spec and spec.origin else "")')
if [ "$found" = "$want" ]; then
  exit 0
fi
echo "install_python: installing models/ (gatescope) from $here${found:+ (was $found)}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# --break-system-packages: PEP 668 marks Debian's Python as externally managed; the package
# goes to /usr/local (pip's default for root), never into Debian's own directories.
$SUDO /usr/bin/python3 -m pip install --quiet --editable "$here/models" --no-deps --no-index \
  --no-build-isolation --break-system-packages --disable-pip-version-check \
  --root-user-action=ignore
