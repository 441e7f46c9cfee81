#!/usr/bin/env bash
# Configures and builds everything into build/ (Release, ccache when present, two jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: share hits between checkouts in different folders (CI clones afresh).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${JOBS:-2}"
