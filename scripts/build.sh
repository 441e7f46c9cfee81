#!/usr/bin/env bash
# Configures and builds everything into build/ (Release, ccache when present, two jobs), against the PyTorch of
# $DUALPIPE_PYTHON (scripts/env.sh: the pinned one that scripts/setup.sh installs, unless you name your own).
#   scripts/build.sh                 everything: libraries, tools, tests, benchmarks, and the Python package
#                                    (installed into $DUALPIPE_PYTHON's environment: scripts/install_python_package.sh)
#   scripts/build.sh dualpipe        only the targets named (the README's first command builds `dualpipe`)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
torch_prefix=$(torch_cmake_prefix)
# ccache: share hits between checkouts in different folders (CI clones afresh); a unity batch (cmake/unity_build.cmake)
# names its files by absolute path, so it is found again only in the same folder.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# The configure output but the summary line ("dualpipe: LibTorch 2.11.0 (...); CUDA ON; NCCL ON").
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_prefix" -DDUALPIPE_PYTHON="$DUALPIPE_PYTHON" |
  { grep '^-- dualpipe:' || true; }
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "${JOBS:-2}" "${targets[@]}"
[[ $# -gt 0 ]] || scripts/install_python_package.sh
