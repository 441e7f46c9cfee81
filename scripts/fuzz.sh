#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/, JOBS at a time, each for SECONDS_PER_TARGET (default 60), seeded with the
# project's own files: schedules written by `dualpipe schedule` for every kind (text and CSV), the trace and
# cost seeds in fuzz/seeds/. Builds build-fuzz/ with Clang, AddressSanitizer and UndefinedBehaviorSanitizer.
# A finding stops the script (exit 1) with libFuzzer's report and the input in build-fuzz/findings/; turn it into
# a regression test (docs/fuzzing.md). Each target's whole output is in build-fuzz/logs/.
#   scripts/fuzz.sh                 # 60 s per target; JOBS=N builds with N jobs and fuzzes N targets at a
#                                   # time (default 1)
#   SECONDS_PER_TARGET=600 scripts/fuzz.sh fuzz_text fuzz_trace
#   scripts/fuzz.sh --build-only    builds the targets and stops (scripts/ci.sh, while PyTorch downloads)
set -euo pipefail
cd "$(dirname "$0")/.."
per_target=${SECONDS_PER_TARGET:-60}
jobs=${JOBS:-1}
build_only=0
targets=()
for arg in "$@"; do
  if [[ $arg == --build-only ]]; then build_only=1; else targets+=("$arg"); fi
done
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_text fuzz_csv fuzz_trace fuzz_cost fuzz_metrics fuzz_manifest fuzz_kineto fuzz_layout
                                  fuzz_planner fuzz_replan fuzz_stall)

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install -y clang)" >&2; exit 2; }
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
# -O1 and line tables only: a cold build in 102 s instead of 133 s at -O2 -g (two cores), and libFuzzer's reports
# still name file:line.
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DDUALPIPE_FUZZ=ON \
  -DDUALPIPE_SANITIZE=address,undefined -DDUALPIPE_WITH_TORCH=OFF -DDUALPIPE_BUILD_TESTS=OFF \
  -DDUALPIPE_BUILD_BENCH=OFF >/dev/null
if (( build_only )); then
  cmake --build build-fuzz -j"$jobs" --target "${targets[@]}"
  exit 0
fi
# The text and CSV seeds are written by `dualpipe schedule`: the normal build's (scripts/build.sh, which CI runs
# first) when there is one, else one built here with the targets (the CLI's sources are two thirds of this build).
dualpipe=${DUALPIPE:-build/dualpipe}
build_targets=("${targets[@]}")
if [[ ! -x $dualpipe ]]; then
  dualpipe=build-fuzz/dualpipe
  build_targets+=(dualpipe)
fi
cmake --build build-fuzz -j"$jobs" --target "${build_targets[@]}"

# Seed corpora from the project's own output and files.
seeds=build-fuzz/seeds
mkdir -p "$seeds/text" "$seeds/csv"
for kind in gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zbv chimera dualpipe dualpipev; do
  for size in "-r 2 -m 4" "-r 4 -m 8"; do
    name="$kind${size// /}"
    "$dualpipe" schedule --kind "$kind" $size > "$seeds/text/$name.txt" 2>/dev/null || true
    "$dualpipe" schedule --kind "$kind" $size --lower > "$seeds/text/$name.lower.txt" 2>/dev/null || true
    "$dualpipe" schedule --kind "$kind" $size --format csv > "$seeds/csv/$name.csv" 2>/dev/null || true
  done
done
find "$seeds" -type f -empty -delete  # kinds that cannot serve a size
for d in text csv; do
  [[ -n $(ls "$seeds/$d") ]] || { echo "fuzz.sh: '$dualpipe schedule' wrote no $d seeds" >&2; exit 2; }
done
for d in trace cost metrics manifest kineto layout planner replan stall; do
  mkdir -p "$seeds/$d"
  cp fuzz/seeds/$d/* "$seeds/$d/"
done

mkdir -p build-fuzz/findings build-fuzz/corpus build-fuzz/logs
# One target for per_target seconds; its whole output goes to its log. Returns non-zero on a finding.
fuzz_one() {
  local target=$1 seed corpus log status
  case $target in
    fuzz_text) seed=text ;; fuzz_csv) seed=csv ;; fuzz_trace) seed=trace ;; fuzz_cost) seed=cost ;;
    fuzz_metrics) seed=metrics ;; fuzz_manifest) seed=manifest ;; fuzz_kineto) seed=kineto ;;
    fuzz_layout) seed=layout ;; fuzz_planner) seed=planner ;; fuzz_replan) seed=replan ;; fuzz_stall) seed=stall ;;
    *) echo "fuzz.sh: unknown target '$target'" >&2; return 2 ;;
  esac
  corpus=build-fuzz/corpus/$target
  log=build-fuzz/logs/$target.log
  mkdir -p "$corpus"
  # An input is at most 64 KiB, so one allocation of 256 MiB is a number in it driving the memory: a finding,
  # even when the process stays under the 2 GiB limit (fuzz_trace once peaked at 1.9 GB on one input).
  set +e
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build-fuzz/$target" "$corpus" "$seeds/$seed" -max_total_time="$per_target" -rss_limit_mb=2048 \
    -malloc_limit_mb=256 -timeout=20 -report_slow_units=20 -max_len=65536 \
    -artifact_prefix="build-fuzz/findings/$target-" -print_final_stats=1 >"$log" 2>&1
  status=$?
  set -e
  # Shown: the progress summary, final stats and any sanitizer lines.
  echo "== $target: ${per_target} s, seeds $seeds/$seed, log $log"
  grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==[0-9]+==|SUMMARY|INFO: (Loaded|seed)|Done )' "$log" || true
  # A finding: libFuzzer exits non-zero (crash, sanitizer report, timeout, out of memory) and saves the input;
  # a slow unit is only saved. Either fails the script, with libFuzzer's report.
  if [[ $status -ne 0 ]] || ls build-fuzz/findings/"$target"-* >/dev/null 2>&1; then
    echo "fuzz.sh: $target found a problem (libFuzzer exit status $status); its report, from $log:" >&2
    if grep -qE 'ERROR:|runtime error:|Slow unit' "$log"; then
      { sed -n -E '/ERROR:|runtime error:|Slow unit/,$p' "$log" | head -n 200 >&2; } || true
    else
      tail -n 40 "$log" >&2
    fi
    echo "fuzz.sh: inputs: $(ls build-fuzz/findings/"$target"-* 2>/dev/null | tr '\n' ' ')" >&2
    echo "fuzz.sh: turn each into a regression test, then remove it (docs/fuzzing.md)" >&2
    return 1
  fi
}
# JOBS targets at a time (each libFuzzer process uses one core); the first finding fails the script once the
# running targets ended.
failed=0 running=0
for target in "${targets[@]}"; do
  if (( running >= jobs )); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
while (( running > 0 )); do
  wait -n || failed=1
  running=$((running - 1))
done
(( failed == 0 )) || exit 1
echo "fuzz.sh: no findings"
