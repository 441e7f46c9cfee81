#!/usr/bin/env bash
# The README's second command, and what .ci/run runs: installs what is needed, builds everything, runs the whole
# test suite, the sanitized tests and the fuzz targets. The same as
#   scripts/setup.sh && scripts/build.sh && scripts/test.sh
# but for one overlap: the fuzz targets, which need Clang and no LibTorch, build on one core in the background from
# when Debian's packages are there, for scripts/test.sh's last phase. On a new machine pip leaves that core idle
# while it downloads and unpacks PyTorch (about 2 minutes); otherwise the build shares the cores with the main build.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --packages
mkdir -p build-fuzz
fuzz_log=build-fuzz/prebuild.log
# In a session of its own, so that a failure here ends it with its compilers rather than leaving them behind.
JOBS=1 setsid scripts/fuzz.sh --build-only >"$fuzz_log" 2>&1 &
fuzz_build=$!
trap 'kill -- -"$fuzz_build" 2>/dev/null || true' EXIT
scripts/setup.sh --python
scripts/build.sh
if ! wait "$fuzz_build"; then
  echo "ci.sh: building the fuzz targets failed; its output, from $fuzz_log:" >&2
  tail -n 60 "$fuzz_log" >&2
  exit 1
fi
trap - EXIT
echo "ci.sh: fuzz targets built (scripts/fuzz.sh --build-only, $fuzz_log)"
scripts/test.sh
