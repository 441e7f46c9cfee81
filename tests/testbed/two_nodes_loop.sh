#!/usr/bin/env bash
# Issue 27's check of the test bed under concurrency: `ctest -j2` runs the two-node tests ROUNDS times in a row
# (default 20) while two more test beds are made and removed at once, over and over, beside them. Prints one
# line per round and the churn's count; exits 1 at the first failed round (its ctest output is shown).
#   tests/testbed/two_nodes_loop.sh [ROUNDS]     from the source tree, after scripts/build.sh; as root
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-20}
stop=$(mktemp -u)
churn() {  # until $stop exists; counts the beds that failed to come up or go down
  local i=0 bad=0 k p=()
  while [[ ! -e $stop ]]; do
    i=$((i + 1))
    for k in 1 2; do scripts/testbed.sh up "lp$k$$" >/dev/null & p[k]=$!; done
    for k in 1 2; do wait "${p[k]}" || bad=$((bad + 1)); done
    for k in 1 2; do scripts/testbed.sh down "lp$k$$" & p[k]=$!; done
    for k in 1 2; do wait "${p[k]}" || bad=$((bad + 1)); done
  done
  echo "churn: $i rounds of 2 beds made and removed beside the tests, $bad failures"
}
churn &
churner=$!
trap 'touch "$stop"; wait "$churner"; rm -f "$stop"' EXIT
for ((r = 1; r <= rounds; r++)); do
  start=$SECONDS
  if ! out=$(ctest --test-dir build -j2 -R 'TwoNodes|^testbed$' --output-on-failure 2>&1); then
    echo "round $r: FAILED"
    echo "$out"
    exit 1
  fi
  echo "round $r: $(grep -E 'tests passed' <<<"$out") ($((SECONDS - start)) s)"
done
