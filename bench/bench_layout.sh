#!/usr/bin/env bash
# The layout planner's whole search, timed: DeepSeek-V3 on 2048 H800s and Llama 3 405B on 16384 H100s (target:
# each within 5 s of CPU on the 2-core machine). Prints the median and range of N runs (default 5) of each, in CPU
# seconds (user + system) and wall seconds.
#   bench/bench_layout.sh [N] [BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bin=${2:-build/dualpipe}
[[ -x $bin ]] || { echo "bench_layout.sh: $bin not built (scripts/build.sh)" >&2; exit 1; }
time_search() {
  local lines=() TIMEFORMAT='%U %S %R'
  for ((i = 0; i < runs; i++)); do
    lines+=("$({ time "$bin" layout "$@" >/dev/null; } 2>&1)")
  done
  printf '%s\n' "${lines[@]}" | awk -v what="$*" '
    { cpu[NR] = $1 + $2; wall[NR] = $3 }
    function median(a, n,   i, j, t) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return a[int((n + 1) / 2)]
    }
    END {
      n = NR; c = median(cpu, n); cmin = cpu[1]; cmax = cpu[n]; w = median(wall, n)
      printf "%-72s CPU median %.2f s (min %.2f, max %.2f), wall %.2f s, %d runs\n", what, c, cmin, cmax, w, n }'
}
time_search --model deepseek-v3 --cluster h800x2048 --global-batch 15360
time_search --model llama3-405b --cluster h100-sxmx16384 --global-batch 2048
