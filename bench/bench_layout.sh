#!/usr/bin/env bash
# The layout planner's whole search, timed: DeepSeek-V3 on 2048 H800s and Llama 3 405B on 16384 H100s (target:
# each within 5 s on the 2-core machine). Prints the median and range of N runs (default 5) of each.
#   bench/bench_layout.sh [N] [BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bin=${2:-build/dualpipe}
[[ -x $bin ]] || { echo "bench_layout.sh: $bin not built (scripts/build.sh)" >&2; exit 1; }
time_search() {
  local times=() start end
  for ((i = 0; i < runs; i++)); do
    start=$(date +%s%N)
    "$bin" layout "$@" >/dev/null
    end=$(date +%s%N)
    times+=("$(((end - start) / 1000000))")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v what="$*" '{ t[NR] = $1 / 1000 } END {
    printf "%-75s median %.2f s (min %.2f, max %.2f, %d runs)\n", what, t[int((NR + 1) / 2)], t[1], t[NR], NR }'
}
time_search --model deepseek-v3 --cluster h800x2048 --global-batch 15360
time_search --model llama3-405b --cluster h100-sxmx16384 --global-batch 2048
