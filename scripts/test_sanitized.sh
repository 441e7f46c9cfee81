#!/usr/bin/env bash
# Builds the tests labelled sanitize (our code that runs threads or parses input) with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-asan/ (Debug, no benchmarks) and runs them. Run by scripts/test.sh after
# the normal suite.
#   scripts/test_sanitized.sh        JOBS=N for N parallel jobs (default 2), ASAN_BUILD_DIR=DIR instead of build-asan
#   scripts/test_sanitized.sh --thread
#                                    ThreadSanitizer instead, into build-tsan/ (TSAN_BUILD_DIR=DIR): the runtime's and
#                                    communicators' tests with ranks as threads (test_runtime's tests labelled
#                                    sanitize), LibTorch's own races suppressed (tests/tsan.supp). Not run by
#                                    scripts/test.sh: its build is another cold LibTorch build (docs/CONTRIBUTING.md)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
thread=0
for arg in "$@"; do
  case $arg in
    --thread) thread=1 ;;
    *) echo "test_sanitized.sh: unknown argument '$arg' (the one option is --thread)" >&2; exit 2 ;;
  esac
done
torch_prefix=$(torch_cmake_prefix)
# ccache: share hits between checkouts in different folders (CI clones afresh); a unity batch (cmake/unity_build.cmake)
# names its files by absolute path, so it is found again only in the same folder.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# LibTorch keeps allocations alive until exit by design (operator registries, thread pools): leak reports
# would be about LibTorch, not us. Set before building: gtest_discover_tests runs the tests to list them.
export ASAN_OPTIONS=detect_leaks=0
# A UBSan finding prints its stack and fails the test (the code is also built with -fno-sanitize-recover).
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if (( thread )); then
  dir=${TSAN_BUILD_DIR:-build-tsan} sanitizers=thread
  # Any race report fails the test that caused it (exit code 66); the second stack of a lock-order report is kept.
  export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1"
else
  dir=${ASAN_BUILD_DIR:-build-asan} sanitizers=address,undefined
fi
# Debug with line tables only (-g1): reports still name file:line, and the LibTorch-heavy files compile
# about a quarter faster than with full -g.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DDUALPIPE_SANITIZE=$sanitizers \
  -DDUALPIPE_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH="$torch_prefix" >/dev/null
if (( thread )); then
  grep -q '^DUALPIPE_WITH_TORCH:BOOL=ON' "$dir/CMakeCache.txt" ||
    { echo "test_sanitized.sh --thread: the runtime's tests need LibTorch (DUALPIPE_WITH_TORCH=ON)" >&2; exit 2; }
  cmake --build "$dir" -j "${JOBS:-2}" --target test_runtime
  ctest --test-dir "$dir" --output-on-failure -j "${JOBS:-2}" --timeout 300 -L '^sanitize$' -L '^runtime$'
  exit 0
fi
# Only the programs of the tests labelled sanitize (tests/labels.cmake): the core's (util, schedule, trace, sim, run,
# layout and the parsers, in test_util ... test_parallel; the launcher's node layout, test_launch) and the runtime's
# and communicators' with ranks as threads (test_runtime). The end-to-end CLI runs and the training library's tests
# (test_cli, test_train) run once, in the normal suite: they start processes, and what they add over the kept tests
# is LibTorch's training code rather than ours that runs threads or parses input. The readers are fuzzed under the
# same sanitizers (scripts/fuzz.sh).
targets=(test_util test_schedule test_trace test_sim test_run test_layout test_viz test_data test_launch test_parallel)
if grep -q '^DUALPIPE_WITH_TORCH:BOOL=ON' "$dir/CMakeCache.txt"; then targets+=(test_runtime); fi
cmake --build "$dir" -j "${JOBS:-2}" --target "${targets[@]}"
ctest --test-dir "$dir" --output-on-failure -j "${JOBS:-2}" --timeout 300 -L '^sanitize$'
