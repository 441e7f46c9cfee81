#!/usr/bin/env bash
# Builds and installs the Python package `dualpipe` of this checkout (pyproject.toml, docs/python.md) into the
# environment of $DUALPIPE_PYTHON (scripts/env.sh). scripts/setup.sh runs it, and scripts/build.sh when it builds
# everything, so the tests always import the checkout's code. A few seconds when nothing changed.
#
# The extensions: the planner's C++ core, built by CMake in build-python/ (ccache gives the core's objects of build/
# and back: same compiler name, same flags), and the executor on Python modules (below). Without the build tools of requirements.txt, pip fetches them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
isolation=(--no-build-isolation)
"$DUALPIPE_PYTHON" -c 'import scikit_build_core, pybind11' 2>/dev/null || isolation=()
# dualpipe._runtime (dualpipe.DualPipe): the main build's when it made one (scripts/build.sh runs this after
# building), so the executor is compiled once; else none with DUALPIPE_PACKAGE_RUNTIME=OFF (scripts/setup.sh, before
# the first build); else pip's build compiles it.
runtime=()
prebuilt=$(ls build/_runtime*.so 2>/dev/null | head -n 1 || true)
if [[ -n $prebuilt ]]; then
  runtime=(-C "cmake.define.DUALPIPE_PREBUILT_RUNTIME=$PWD/$prebuilt")
elif [[ ${DUALPIPE_PACKAGE_RUNTIME:-ON} == OFF ]]; then
  runtime=(-C cmake.define.DUALPIPE_PACKAGE_RUNTIME=OFF)
fi
echo "install_python_package.sh: building and installing the Python package dualpipe for $DUALPIPE_PYTHON"
CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" CXX="${CXX:-c++}" \
  "$DUALPIPE_PYTHON" -m pip install -q --disable-pip-version-check --no-deps "${isolation[@]}" "${runtime[@]}" .
