#!/usr/bin/env bash
# Time and peak memory that a size written in the input costs, for two builds side by side (issue 52): a layout
# search of a model with 100,000 layers, `dualpipe profile --kineto` of traces of 200,000 and 1,500,000 events
# (bench/make_kineto_trace.py; 26 MB and 198 MB), and plans of thousands of ranks at one or two micro-batches beside
# one of as many (stage, micro-batch) pairs at R=375 (issue 75). One run each; the ratios are OLD / NEW.
#   bench/bench_input_sizes.sh OLD_DUALPIPE [NEW_DUALPIPE]      (NEW default: build/dualpipe)
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bench/bench_input_sizes.sh OLD_DUALPIPE [NEW_DUALPIPE]}
new=${2:-build/dualpipe}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '{"name": "deep", "layers": 100000, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 32000, "seq_len": 2048}' \
  >"$work/deep.json"
python3 bench/make_kineto_trace.py 200000 "$work/k200k.json"
python3 bench/make_kineto_trace.py 1500000 "$work/k1500k.json"
# "seconds kilobytes" of one run of `BIN ARGS...` (its output dropped), or "- -" when it fails or runs over 300 s.
measure() {
  local bin=$1
  shift
  if /usr/bin/time -o "$work/time" -f '%e %M' timeout 300 "$bin" "$@" >/dev/null 2>&1; then cat "$work/time"
  else echo "- -"; fi
}
row() {
  local what=$1 skip_old=$2
  shift 2
  local o n
  if [[ $skip_old == 1 ]]; then o="- -"; else o=$(measure "$old" "$@"); fi
  n=$(measure "$new" "$@")
  read -r os ok <<<"$o"
  read -r ns nk <<<"$n"
  awk -v w="$what" -v os="$os" -v ok="$ok" -v ns="$ns" -v nk="$nk" 'BEGIN {
    ratio = (os == "-" || ns == 0) ? "-" : sprintf("%.1fx", os / ns)
    printf "%-32s old %7s s %8s KB   new %7s s %8s KB   time %s\n", w, os, ok, ns, nk, ratio }'
}
row "layout, 100000 layers" 0 layout --model "$work/deep.json" --cluster h100-sxmx64 --global-batch 512
row "profile, 200000 events" 0 profile --kineto "$work/k200k.json" -o "$work/out.txt"
# The old reader took over 120 s and 923 MB on 1.5M events (issue 52): not run again.
row "profile, 1500000 events" 1 profile --kineto "$work/k1500k.json" -o "$work/out.txt"
row "plan, R=3000 M=1" 0 plan -r 3000 -m 1
row "plan, R=4096 M=2" 0 plan -r 4096 -m 2
row "plan, R=375 M=8 (as many pairs)" 0 plan -r 375 -m 8
