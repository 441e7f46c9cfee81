#!/usr/bin/env bash
# Runs the whole test suite (after scripts/build.sh), then our threaded and parsing code again under
# AddressSanitizer and UndefinedBehaviorSanitizer (scripts/test_sanitized.sh, its own build in build-asan/;
# SANITIZE=0 skips it), then every fuzz target for FUZZ_SECONDS (default 20: a smoke run from the seeds inside
# CI's time; the long runs are in docs/fuzzing.md) each, JOBS (default 2) at a time (scripts/fuzz.sh, its own build
# in build-fuzz/; FUZZ=0 skips it).
#   scripts/test.sh --quick     only the tests labelled quick (tests/labels.cmake): every layer's core behaviour,
#                               about a minute after a build; no sanitizers, no fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    *) echo "test.sh: unknown argument '$arg' (the one option is --quick)" >&2; exit 2 ;;
  esac
done
echo "PyTorch $("$DUALPIPE_PYTHON" -c 'import torch; print(torch.__version__)') from $DUALPIPE_PYTHON"
if (( quick )); then
  ctest --test-dir build --output-on-failure -j "${JOBS:-2}" --timeout 300 -L '^quick$'
  exit 0
fi
ctest --test-dir build --output-on-failure -j "${JOBS:-2}" --timeout 300
if [[ "${SANITIZE:-1}" != 0 ]]; then
  echo
  echo "==== the tests again under AddressSanitizer + UndefinedBehaviorSanitizer (scripts/test_sanitized.sh) ===="
  scripts/test_sanitized.sh
fi
if [[ "${FUZZ:-1}" != 0 ]]; then
  echo
  echo "==== the fuzz targets, ${FUZZ_SECONDS:-20} s each (scripts/fuzz.sh) ===="
  SECONDS_PER_TARGET="${FUZZ_SECONDS:-20}" JOBS="${JOBS:-2}" scripts/fuzz.sh
fi
