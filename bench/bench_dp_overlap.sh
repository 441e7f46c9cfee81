#!/usr/bin/env bash
# Data-parallel gradient reduction overlapped with the step (the default) against reducing after the step
# (--no-dp-overlap), on the two-node test bed: `dualpipe train --pp 2 --dp 2`, one pipeline per emulated machine,
# so the all-reduce crosses the rate-limited link. Prints, per schedule and mode, the medians over steps 3..N of the
# step time and of the exposed reduction (the longest wait of a rank for its reduction after its last action:
# dp_wait_ms), and the ratios measured side by side. Needs root (network namespaces).
#   bench/bench_dp_overlap.sh [STEPS=12] [RATE=100mbit]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-12}
rate=${2:-100mbit}
bin=$PWD/build/dualpipe
[[ -x $bin ]] || { echo "bench_dp_overlap.sh: build first (scripts/build.sh)" >&2; exit 2; }
scripts/testbed.sh check >/dev/null || { scripts/testbed.sh check; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run_pair() { # SCHEDULE MODE-FLAG NAME: both nodes, metrics of node 0 into $out/NAME.jsonl
  local job=(train --schedule "$1" --pp 2 --dp 2 -m 8 --steps "$steps" --eval-every 0 --sample-tokens 0 --trace ""
             --nnodes 2 --master-addr "$TESTBED_ADDR0" --master-port 29450)
  [[ -n $2 ]] && job+=("$2")
  ip netns exec "$TESTBED_NODE0" "$bin" "${job[@]}" --node-rank 0 --metrics "$out/$3.jsonl" > "$out/$3.n0.log" 2>&1 &
  local node0=$!
  ip netns exec "$TESTBED_NODE1" "$bin" "${job[@]}" --node-rank 1 > "$out/$3.n1.log" 2>&1 ||
    { cat "$out/$3.n1.log" >&2; return 1; }
  wait $node0 || { cat "$out/$3.n0.log" >&2; return 1; }
}
export -f run_pair
export bin steps out

echo "dualpipe train --pp 2 --dp 2 -m 8 (default model), one pipeline per node, link $rate, $steps steps; medians of steps 3..$steps"
scripts/testbed.sh run dpbench --rate "$rate" -- bash -c '
  set -e
  for schedule in 1f1b dualpipe; do
    run_pair $schedule "" $schedule-overlap
    run_pair $schedule --no-dp-overlap $schedule-after
  done'
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def medians(name):
    steps = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    steps = [s for s in steps if s.get("type") == "step" and s["step"] >= 3]
    return statistics.median(s["step_ms"] for s in steps), statistics.median(s["dp_wait_ms"] for s in steps)
print(f"{'schedule':10} {'mode':22} {'step ms':>9} {'exposed reduction ms':>21}")
for schedule in ("1f1b", "dualpipe"):
    on, off = medians(f"{schedule}-overlap"), medians(f"{schedule}-after")
    print(f"{schedule:10} {'overlapped (default)':22} {on[0]:9.1f} {on[1]:21.1f}")
    print(f"{schedule:10} {'after the step':22} {off[0]:9.1f} {off[1]:21.1f}")
    print(f"{schedule:10} {'overlapped / after':22} {on[0] / off[0]:9.3f} {on[1] / off[1]:21.3f}")
PY
