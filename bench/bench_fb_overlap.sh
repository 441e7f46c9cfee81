#!/usr/bin/env bash
# DualPipe's forward-backward overlap on an MoE model, on the two-node test bed: the halves taking turns at each
# all-to-all (the default), the halves computing at once on two threads (--fb-overlap-threads), and the forward,
# then the backward (--no-fb-overlap), with the expert all-to-alls crossing the rate-limited link; then DualPipe
# against 1F1B and ZB-H1 on the same model. Prints the medians over
# steps 3..N of the step time and of the exposed all-to-all time (the part of the rank's all-to-all time in which
# none of its threads computed, from the trainer's metrics: all_to_all_exposed_ms, the worst rank), and the ratios
# measured side by side. Needs root (network namespaces).
#   bench/bench_fb_overlap.sh [STEPS=10] [RATE=100mbit] [MICROBATCHES=8]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
rate=${2:-100mbit}
microbatches=${3:-8}
bin=$PWD/build/dualpipe
[[ -x $bin ]] || { echo "bench_fb_overlap.sh: build first (scripts/build.sh)" >&2; exit 2; }
scripts/testbed.sh check >/dev/null || { scripts/testbed.sh check; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# NAME SCHEDULE PP [FLAG]: one job over both nodes (the first pipeline on node 0, the second on node 1, so each
# expert group spans the link); node 0's metrics go to $out/NAME.jsonl.
run_job() {
  local job=(train --schedule "$2" --pp "$3" --dp 2 --ep 2 --experts 4 --top-k 2 -m "$microbatches" --steps "$steps" --eval-every 0
             --sample-tokens 0 --trace "" --nnodes 2 --master-addr "$TESTBED_ADDR0" --master-port 29460)
  [[ -n ${4:-} ]] && job+=("$4")
  ip netns exec "$TESTBED_NODE0" "$bin" "${job[@]}" --node-rank 0 --metrics "$out/$1.jsonl" > "$out/$1.n0.log" 2>&1 &
  local node0=$!
  ip netns exec "$TESTBED_NODE1" "$bin" "${job[@]}" --node-rank 1 > "$out/$1.n1.log" 2>&1 ||
    { cat "$out/$1.n1.log" >&2; return 1; }
  wait $node0 || { cat "$out/$1.n0.log" >&2; return 1; }
}
export -f run_job
export bin steps out microbatches

echo "MoE model (default size, 4 experts, top-2), --dp 2 --ep 2 -m $microbatches, one pipeline per node, link $rate," \
     "$steps steps;"
echo "medians of steps 3..$steps"
scripts/testbed.sh run fbbench --rate "$rate" -- bash -c '
  set -e
  run_job v-on dualpipev 1
  run_job v-threads dualpipev 1 --fb-overlap-threads
  run_job v-off dualpipev 1 --no-fb-overlap
  run_job dp-on dualpipe 2
  run_job dp-threads dualpipe 2 --fb-overlap-threads
  run_job dp-off dualpipe 2 --no-fb-overlap
  run_job 1f1b 1f1b 2
  run_job zbh1 zb-h1 2'
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def medians(name):
    steps = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    steps = [s for s in steps if s.get("type") == "step" and s["step"] >= 3]
    return tuple(statistics.median(s[k] for s in steps) for k in ("step_ms", "all_to_all_ms", "all_to_all_exposed_ms"))
print(f"\n{'job':44} {'step ms':>9} {'all-to-all ms':>14} {'exposed ms':>11}")
rows = [("v-on", "dualpipev --pp 1, turns (default)"), ("v-threads", "dualpipev --pp 1, --fb-overlap-threads"),
        ("v-off", "dualpipev --pp 1, --no-fb-overlap"),
        ("dp-on", "dualpipe --pp 2, turns (default)"), ("dp-threads", "dualpipe --pp 2, --fb-overlap-threads"),
        ("dp-off", "dualpipe --pp 2, --no-fb-overlap"),
        ("1f1b", "1f1b --pp 2"), ("zbh1", "zb-h1 --pp 2")]
m = {name: medians(name) for name, _ in rows}
for name, label in rows:
    print(f"{label:44} {m[name][0]:9.1f} {m[name][1]:14.1f} {m[name][2]:11.1f}")
print("\nratios (smaller is better)")
for on, off, label in (("v-on", "v-off", "dualpipev turns / off"), ("v-threads", "v-off", "dualpipev threads / off"),
                       ("dp-on", "dp-off", "dualpipe turns / off"), ("dp-threads", "dp-off", "dualpipe threads / off")):
    print(f"{label:44} step x{m[on][0] / m[off][0]:.3f}   exposed all-to-all x{m[on][2] / m[off][2]:.3f}")
for other, label in (("1f1b", "dualpipe / 1f1b"), ("zbh1", "dualpipe / zb-h1")):
    print(f"{label:44} step x{m['dp-on'][0] / m[other][0]:.3f}")
PY
