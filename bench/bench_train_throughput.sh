#!/usr/bin/env bash
# Training throughput of the transformer language model (issue 9, item 7): tokens/s of `dualpipe train` with
# DualPipe, 1F1B, ZB-H1 and DualPipeV on 2 ranks (2 processes, 1 intra-op thread each) against one process with
# 1 thread training the same model on the same global batch (--ranks 1: one stage, the micro-batches one after
# the other, no communication). Also the step time of DualPipe on 4 ranks, which share the 2 cores.
#
#   bench/bench_train_throughput.sh [BUILD_DIR] [REPEATS]     (default: build, 3)
#
# Each configuration runs REPEATS times, interleaved with the others so that machine noise hits all alike; a
# run's figure is the median step time of its steps 2 to N (step 1 also checks against the reference), and the
# table shows the median over runs. Ratios are tokens/s over the single process's.
set -euo pipefail
build=${1:-build}
repeats=${2:-3}
dualpipe="$build/dualpipe"
[[ -x $dualpipe ]] || { echo "bench_train_throughput: $dualpipe is missing: build first (scripts/build.sh)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model=(--layers 8 --hidden 128 --heads 4 --seq-len 64 --batch 2 --microbatches 8 --steps 8 --eval-every 0
       --sample-tokens 0 --trace '')
configs=("1 1f1b" "2 dualpipe" "2 1f1b" "2 zb-h1" "2 dualpipev" "4 dualpipe")

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for ((rep = 1; rep <= repeats; ++rep)); do
  for config in "${configs[@]}"; do
    read -r ranks kind <<<"$config"
    metrics="$work/$ranks-$kind-$rep.jsonl"
    "$dualpipe" train --ranks "$ranks" --schedule "$kind" "${model[@]}" --metrics "$metrics" >"$work/log" 2>&1 ||
      { cat "$work/log" >&2; exit 1; }
    python3 -c 'import json,sys,statistics as s
steps=[json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
print(s.median(r["step_ms"] for r in steps[1:]))' "$metrics" >>"$work/$ranks-$kind.ms"
    echo "run $rep: $ranks rank(s) $kind done" >&2
  done
done

tokens=$((8 * 2 * 64))
base_ms=$(median <"$work/1-1f1b.ms")
printf '%-8s %-12s %10s %10s %8s\n' ranks schedule "step ms" "tokens/s" ratio
for config in "${configs[@]}"; do
  read -r ranks kind <<<"$config"
  ms=$(median <"$work/$ranks-$kind.ms")
  awk -v r="$ranks" -v k="$kind" -v ms="$ms" -v base="$base_ms" -v t="$tokens" \
    'BEGIN { printf "%-8s %-12s %10.1f %10.0f %7.2fx\n", r, (r == 1 ? "1 process" : k), ms, t / ms * 1000, base / ms }'
done
