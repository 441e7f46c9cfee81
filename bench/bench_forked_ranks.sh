#!/usr/bin/env bash
# Ranks forked from one process that loaded LibTorch (what `dualpipe train` does: dualpipe-train-worker --launch)
# against ranks that each execute the worker (`dualpipe launch -- dualpipe-train-worker`, after the worker's
# --check, as `dualpipe train` did before), alternating, REPS times each: the medians and ranges of the CPU time
# (task-clock) and page faults of the whole job, from `perf stat`, and their ratios. The same binary serves both,
# so the figures isolate the forking; both end their processes without LibTorch's static destructors.
#   bench/bench_forked_ranks.sh [RANKS=4] [REPS=5]
set -euo pipefail
script=$(realpath "$0")
cd "$(dirname "$script")/.."
if [[ ${1:-} == --executed ]]; then  # one job the old way: RANKS JOB...
  shift
  ranks=$1
  shift
  build/dualpipe-train-worker --check "$@" && exec build/dualpipe launch --nproc "$ranks" -- \
    "$PWD/build/dualpipe-train-worker" "$@"
fi
ranks=${1:-4}
reps=${2:-5}
worker=$PWD/build/dualpipe-train-worker
launcher=$PWD/build/dualpipe
[[ -x $worker && -x $launcher ]] || { echo "bench_forked_ranks.sh: build first (scripts/build.sh)" >&2; exit 2; }
command -v perf >/dev/null || { echo "bench_forked_ranks.sh: needs perf (apt-get install linux-perf)" >&2; exit 2; }
job=(--kind 1f1b --ranks "$ranks" --microbatches 8 --layers 8 --hidden 32 --heads 2 --seq-len 16 --batch 2
     --steps 4 --warmup 1 --eval-every 4 --sample-tokens 8 --trace "")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

measure() { # NAME COMMAND...: appends "cpu_ms faults" of the command to $out/NAME
  local name=$1
  shift
  perf stat -x, -e task-clock,page-faults -o "$out/stat" -- "$@" > "$out/log" 2>&1 ||
    { cat "$out/log" >&2; exit 1; }
  awk -F, '$3=="task-clock"{c=$1} $3=="page-faults"{f=$1} END{printf "%.0f %d\n", c, f}' "$out/stat" >> "$out/$name"
}
for ((i = 0; i < reps; ++i)); do
  measure executed "$script" --executed "$ranks" "${job[@]}"
  measure forked "$worker" --launch "${job[@]}"
done

# Median and range of column COLUMN of FILE.
stats() { sort -n -k"$2" "$1" | awk -v c="$2" '{v[NR]=$c} END{printf "%d (%d-%d)", v[int((NR+1)/2)], v[1], v[NR]}'; }
median() { sort -n -k"$2" "$1" | awk -v c="$2" '{v[NR]=$c} END{print v[int((NR+1)/2)]}'; }
echo "1F1B on $ranks ranks, 4 steps of a 0.12M-parameter model; medians (ranges) of $reps runs each, alternating"
printf '%-10s %-26s %s\n' "ranks" "CPU ms" "page faults"
printf '%-10s %-26s %s\n' executed "$(stats "$out/executed" 1)" "$(stats "$out/executed" 2)"
printf '%-10s %-26s %s\n' forked "$(stats "$out/forked" 1)" "$(stats "$out/forked" 2)"
awk -v a="$(median "$out/executed" 1)" -v b="$(median "$out/forked" 1)" -v c="$(median "$out/executed" 2)" \
    -v d="$(median "$out/forked" 2)" 'BEGIN{printf "executed / forked: CPU %.2fx, page faults %.2fx\n", a/b, c/d}'
