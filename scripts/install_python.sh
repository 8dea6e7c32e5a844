#!/usr/bin/env bash
# Installs this checkout's Python packages for Debian's /usr/bin/python3, editable: the
# gatescope package (models/: attention modules, networks, export) and the gatescope_client
# package (client/python: the Python client). Imports then run this checkout's files in
# place. Idempotent: a package that already resolves to this checkout is left alone, without
# pip. Otherwise pip builds the editable wheel offline from Debian's setuptools and wheel
# (setup.sh installs them): no index, no dependency resolution (torch, numpy and protobuf
# are Debian's), no build isolation. One checkout is installed at a time; installing
# another one replaces it (the tests check that they import their own checkout's package).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd -P)
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# install DIR MODULE: DIR (a pyproject) unless MODULE already imports from it.
install() {
  local dir=$1 module=$2
  local want="$here/$dir/$module/__init__.py"
  # -I: ignore PYTHONPATH and the working directory, so this sees the installed state.
  local found
  found=$(cd / && /usr/bin/python3 -I -c 'import importlib.util, os, sys
spec = importlib.util.find_spec(sys.argv[1])
print(os.path.realpath(spec.origin) if spec and spec.origin else "")' "$module")
  if [ "$found" = "$want" ]; then
    return 0
  fi
  echo "install_python: installing $dir/ ($module) from $here${found:+ (was $found)}"
  # --break-system-packages: PEP 668 marks Debian's Python as externally managed; the
  # package goes to /usr/local (pip's default for root), never into Debian's own directories.
  $SUDO /usr/bin/python3 -m pip install --quiet --editable "$here/$dir" --no-deps --no-index \
    --no-build-isolation --break-system-packages --disable-pip-version-check \
    --root-user-action=ignore
}

install models gatescope
install client/python gatescope_client
