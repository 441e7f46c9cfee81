#!/usr/bin/env bash
# Soak test of the runtime (issue 8, item 6; not run by CI): repeated multi-rank runs under a competing CPU load,
# counting hangs and mismatches.
#
#   scripts/soak.sh [--ranks 8] [--steps 200] [--load 2] [--fidelity-runs 3] [--limit 1800]
#
# 1. `runtime_gloo_worker soak STEPS` on RANKS processes (`dualpipe launch`): every schedule kind, STEPS training
#    steps each, every step checked against a single-process run (losses bit-identical, gradients within cosine
#    distance 1e-13). A wait that does not complete fails its rank after the communicator's 60 s timeout, so a
#    hang shows up as a failed run, never as a stuck script; the whole run is also killed after LIMIT seconds.
# 2. `bench_schedule_fidelity --ranks RANKS`, FIDELITY_RUNS times (the program a hang was once seen in).
# LOAD busy processes compete for the cores during both (started here, stopped by their PIDs at the end).
# Prints one line per kind and a last line "soak: H hangs, X mismatches, F failed runs"; exits 0 only when all
# three are 0. Run it after scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

ranks=8 steps=200 load=2 fidelity_runs=3 limit=1800
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --fidelity-runs) fidelity_runs=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for value in "$ranks" "$steps" "$load" "$fidelity_runs" "$limit"; do
  [[ "$value" =~ ^[0-9]+$ ]] || { echo "soak.sh: '$value' is not a whole number" >&2; exit 2; }
done
for program in build/dualpipe build/runtime_gloo_worker build/bench_schedule_fidelity; do
  [[ -x "$program" ]] || { echo "soak.sh: $program is missing; run scripts/build.sh first" >&2; exit 2; }
done

load_pids=()
stop_load() { for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_load EXIT
for ((i = 0; i < load; i++)); do
  (while :; do :; done) &
  load_pids+=($!)
done
echo "soak: $ranks ranks, $steps steps per kind, $load busy processes competing, started $(date -u +%FT%TZ)"

hangs=0 mismatches=0 failures=0
log=$(mktemp)
start=$SECONDS
set +e
timeout --kill-after=10 "$limit" build/dualpipe launch --nproc "$ranks" -- build/runtime_gloo_worker soak "$steps" \
  >"$log" 2>&1
status=$?
set -e
grep '^\[rank 0\] soak:' "$log" | sed 's/^\[rank 0\] //'
mismatches=$(grep -c 'step [0-9]*: rank' "$log" || true)
if [[ $status -eq 124 || $status -eq 137 ]]; then
  hangs=$((hangs + 1))
  echo "soak: the worker run was still going after $limit s and was killed"
elif [[ $status -ne 0 ]]; then
  grep -q 'timed out\|did not answer\|stopped responding' "$log" && hangs=$((hangs + 1)) || failures=$((failures + 1))
  echo "soak: the worker run failed (status $status):"
  grep -v '^\[rank [0-9]*\] soak:' "$log" | tail -n 20
fi
echo "soak: worker run took $((SECONDS - start)) s"
rm -f "$log"

for ((run = 1; run <= fidelity_runs; run++)); do
  set +e
  output=$(timeout --kill-after=10 600 build/bench_schedule_fidelity --ranks "$ranks" --steps 3 2>&1)
  status=$?
  set -e
  if [[ $status -eq 0 ]]; then
    echo "soak: bench_schedule_fidelity run $run/$fidelity_runs: ok"
  else
    echo "$output" | tail -n 5
    if [[ $status -eq 124 || $status -eq 137 ]] || grep -q 'timed out\|still running' <<<"$output"; then
      hangs=$((hangs + 1))
      echo "soak: bench_schedule_fidelity run $run/$fidelity_runs: HUNG"
    else
      failures=$((failures + 1))
      echo "soak: bench_schedule_fidelity run $run/$fidelity_runs: failed (status $status)"
    fi
  fi
done

echo "soak: $hangs hangs, $mismatches mismatches, $failures failed runs"
[[ $hangs -eq 0 && $mismatches -eq 0 && $failures -eq 0 ]]
