#!/usr/bin/env bash
# Builds and installs the Python package `dualpipe` of this checkout (pyproject.toml, docs/python.md) into the
# environment of $DUALPIPE_PYTHON (scripts/env.sh). scripts/setup.sh runs it, and scripts/build.sh when it builds
# everything, so the tests always import the checkout's code. A few seconds when nothing changed.
#
# The extension is the planner's C++ core, built by CMake in build-python/; ccache gives the core's objects of
# build/ and back (same compiler name, same flags). Without the build tools of requirements.txt, pip fetches them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
isolation=(--no-build-isolation)
"$DUALPIPE_PYTHON" -c 'import scikit_build_core, pybind11' 2>/dev/null || isolation=()
echo "install_python_package.sh: building and installing the Python package dualpipe for $DUALPIPE_PYTHON"
CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" CXX="${CXX:-c++}" \
  "$DUALPIPE_PYTHON" -m pip install -q --disable-pip-version-check --no-deps "${isolation[@]}" .
