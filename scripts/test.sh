#!/usr/bin/env bash
# Runs the whole test suite (after scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j "${JOBS:-2}" --timeout 300
