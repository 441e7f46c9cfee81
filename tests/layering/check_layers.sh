#!/usr/bin/env bash
# The layering of docs/CONTRIBUTING.md, checked on the sources: each folder includes only the folders below it,
# the LibTorch-free layers never include LibTorch, tools/ holds options, not parsing or fitting logic, and no
# source file is over 500 lines.
# Prints every violation as FILE:LINE: the include, and the rule; exits 1 when there is any.
set -uo pipefail
cd "$(dirname "$0")/../.."

# Folder -> the dualpipe/ folders its files may include (itself included).
declare -A allowed=(
  [util]="util"
  [schedule]="util schedule"
  [trace]="util schedule trace"
  [sim]="util schedule trace sim"
  [viz]="util schedule trace sim viz"
  [run]="util schedule trace sim data parallel run"
  [layout]="util schedule trace sim data run parallel layout"
  [data]="util data"
  [launch]="util launch"
  [comm]="util comm"
  [runtime]="util schedule trace comm runtime"
  [parallel]="util schedule trace comm runtime parallel"
  [models]="util schedule trace comm runtime parallel models"
  [train]="util schedule trace sim data run launch comm runtime parallel models train"
  [python]="util schedule trace sim viz layout python"
  [python_runtime]="util schedule trace comm runtime python_runtime"
)
# Layers that never include LibTorch.
torch_free="util schedule trace sim run layout viz data launch python"
torch_include='^#include <(torch|ATen|c10)/'

failures=0
fail() { echo "$1: $2"; failures=$((failures + 1)); }

for layer in "${!allowed[@]}"; do
  for dir in "include/dualpipe/$layer" "src/$layer"; do
    [[ -d $dir ]] || continue
    while IFS= read -r hit; do
      file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; text=${rest#*:}
      used=$(sed -E 's|^#include "dualpipe/([a-z_]+)/.*|\1|' <<<"$text")
      [[ " ${allowed[$layer]} " == *" $used "* ]] ||
        fail "$file:$line" "$text: $layer/ may include only ${allowed[$layer]// /, } (an arrow back up the layers)"
    done < <(grep -rnE '^#include "dualpipe/[a-z_]+/' "$dir")
    if [[ " $torch_free " == *" $layer "* ]]; then
      while IFS= read -r hit; do fail "${hit%:*}" "${hit##*:}: $layer/ never includes LibTorch"; done \
        < <(grep -rnE "$torch_include" "$dir" | sed -E 's/^([^:]+:[0-9]+):(.*)$/\1:\2/')
    fi
  done
done

# The process mesh's layout, the parallel sizes' rules and ZeRO's sharding rule are part of the LibTorch-free core
# (the planner uses them), and they are all of parallel/ that layout/ may include; run/ (a training run's options)
# takes the parallel sizes' rules alone.
while IFS= read -r hit; do
  fail "${hit%%:*}:$(cut -d: -f2 <<<"$hit")" "$(cut -d: -f3- <<<"$hit"): layout/ may include only parallel/'s \
LibTorch-free mesh.h, parallel_dims.h and zero_shares.h"
done < <(grep -nE '^#include "dualpipe/parallel/' src/layout/*.cpp src/layout/*.h include/dualpipe/layout/*.h |
         grep -vE 'parallel/(mesh|parallel_dims|zero_shares)\.h"')
while IFS= read -r hit; do
  fail "${hit%%:*}:$(cut -d: -f2 <<<"$hit")" "$(cut -d: -f3- <<<"$hit"): run/ may include only parallel/'s \
LibTorch-free parallel_dims.h"
done < <(grep -nE '^#include "dualpipe/parallel/' src/run/*.cpp include/dualpipe/run/*.h |
         grep -vE 'parallel/parallel_dims\.h"')
for file in include/dualpipe/parallel/mesh.h src/parallel/mesh.cpp include/dualpipe/parallel/parallel_dims.h \
    src/parallel/parallel_dims.cpp include/dualpipe/parallel/zero_shares.h; do
  while IFS= read -r hit; do fail "$file:${hit%%:*}" "${hit#*:}: the mesh's layout never includes LibTorch"; done \
    < <(grep -nE "$torch_include" "$file")
done

# tools/dualpipe/ (not the worker in train/) is options: no LibTorch, no text parsing, no cost fitting.
while IFS= read -r hit; do
  fail "${hit%%:*}:$(cut -d: -f2 <<<"$hit")" "$(cut -d: -f3- <<<"$hit"): tools/ holds options only; parsing and \
fitting belong in the library (src/)"
done < <(grep -nE "$torch_include|std::sto[dilf]\(|strto[dlf]\(|std::ifstream|getline\(|json::parse\(|\
^[A-Za-z:<>]+ (fit_[a-z_]*|[a-z_]*_from_trace)\(" tools/dualpipe/*.cpp tools/dualpipe/*.h)

# Data parallelism and ZeRO live in parallel/ (docs/CONTRIBUTING.md): the trainer says when, never how. No
# collective over a data-parallel group, and none of their files, in train/.
collective='->(allreduce|allgather|broadcast|reduce|reduce_scatter|_allgather_base|_reduce_scatter_base)\('
while IFS= read -r hit; do
  fail "${hit%%:*}:$(cut -d: -f2 <<<"$hit")" "$(cut -d: -f3- <<<"$hit"): a collective in train/; data parallelism \
and ZeRO belong in parallel/ (parallel::ReplicatedStep)"
done < <(grep -nE -- "$collective" src/train/*.cpp src/train/*.h)
for file in src/train/*data_parallel* src/train/*sharding* src/train/gradient_norm* src/train/state_bytes*; do
  [[ -e $file ]] && fail "$file" "data parallelism and ZeRO belong in parallel/"
done

# The trainer's rules are written once, in run/ (train_rules.h), and the options' names once, in its table
# (train_options.h): layout/ fills a run::TrainConfig and asks them, so it names no option and restates no rule.
option_or_rule='"[^"]*--(pp|tp|cp|dp|ep|sp|zero1?|recompute|schedule|microbatches|batch|layers|hidden|heads|seq-len|'
option_or_rule+='experts|top-k|stages-per-rank|ranks)\b|the trainer (splits|recomputes|cuts|reads|has|does)'
while IFS= read -r hit; do
  fail "${hit%%:*}:$(cut -d: -f2 <<<"$hit")" "$(cut -d: -f3- <<<"$hit"): layout/ restates the trainer's options \
or rules; ask run/train_options.h and run/train_rules.h"
done < <(grep -nE "$option_or_rule" src/layout/*.cpp src/layout/*.h | grep -v '"dualpipe plan ')

# Small files with one idea: no source file over 500 lines.
while read -r lines file; do
  [[ $file == total ]] && continue
  ((lines > 500)) && fail "$file" "$lines lines, over 500: split it by idea"
done < <(find include src tools tests bench fuzz examples -name '*.cpp' -o -name '*.h' | xargs wc -l)

if ((failures)); then
  echo "layering: $failures violation(s) (docs/CONTRIBUTING.md, 'Layout')"
  exit 1
fi
echo "layering: every include follows the layers of docs/CONTRIBUTING.md"
