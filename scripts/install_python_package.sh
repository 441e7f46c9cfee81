#!/usr/bin/env bash
# Builds and installs the Python package `dualpipe` of this checkout (pyproject.toml, docs/python.md) into the
# environment of $DUALPIPE_PYTHON (scripts/env.sh). scripts/setup.sh runs it, and scripts/build.sh when it builds
# everything, so the tests always import the checkout's code. A few seconds when nothing changed.
#
# The extensions, dualpipe._core (the planner) and dualpipe._runtime (the executor on Python modules): the main
# build's when it made them (scripts/build.sh runs this after building everything), so each source is compiled once;
# else pip builds them with CMake in build-python/ (ccache gives the core's objects of build/ and back: same compiler
# name, same flags). Without the build tools of requirements.txt, pip fetches them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
isolation=(--no-build-isolation)
"$DUALPIPE_PYTHON" -c 'import scikit_build_core, pybind11' 2>/dev/null || isolation=()
# Both paths are always given, empty when build/ has no such module, so that build-python/'s cache keeps no old one.
# dualpipe._runtime (dualpipe.DualPipe) needs PyTorch: none with DUALPIPE_PACKAGE_RUNTIME=OFF.
core=$(ls "$PWD"/build/_core*.so 2>/dev/null | head -n 1 || true)
runtime=$(ls "$PWD"/build/_runtime*.so 2>/dev/null | head -n 1 || true)
prebuilt=(-C "cmake.define.DUALPIPE_PREBUILT_CORE=$core" -C "cmake.define.DUALPIPE_PREBUILT_RUNTIME=$runtime"
          -C "cmake.define.DUALPIPE_PACKAGE_RUNTIME=${DUALPIPE_PACKAGE_RUNTIME:-ON}")
echo "install_python_package.sh: building and installing the Python package dualpipe for $DUALPIPE_PYTHON"
CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" CXX="${CXX:-c++}" \
  "$DUALPIPE_PYTHON" -m pip install -q --disable-pip-version-check --no-deps "${isolation[@]}" "${prebuilt[@]}" .
