#!/usr/bin/env bash
# The GPU check (docs/gpu.md), in two halves:
#   scripts/gpu_check.sh prepare [DIR]   here, with network and Debian's packages: puts into DIR (default
#                                        .gpu-deps/, git-ignored) what a GPU machine without network lacks to build
#                                        dualpipe: CLI11, nlohmann-json and Gloo's headers, GoogleTest's sources.
#                                        Under 64 MiB.
#   scripts/gpu_check.sh run [DIR]       on the GPU machine (PyTorch 2 with CUDA in its python3, CMake, a C++
#                                        compiler, no network): builds GoogleTest from DIR, then dualpipe against
#                                        that machine's PyTorch into build-gpu/, and runs the checks below.
# The checks: the CMake summary (CUDA and NCCL on), libtorch_cuda linked into the worker, the GPU's name, the
# test suite of the runtime (CPU stages) on that machine's PyTorch, and `dualpipe train` refusing or running
# --device cuda.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
deps=$(realpath -m "${2:-.gpu-deps}")

prepare() {
  rm -rf "$deps"
  mkdir -p "$deps/include" "$deps/share/cmake" "$deps/src"
  for header_dir in /usr/include/CLI /usr/include/nlohmann /usr/include/gloo; do
    [[ -d $header_dir ]] || { echo "gpu_check.sh: $header_dir missing: run scripts/setup.sh" >&2; exit 1; }
    cp -r "$header_dir" "$deps/include/"
  done
  cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "$deps/share/cmake/"
  cp -r /usr/src/googletest "$deps/src/"
  local mib
  mib=$(du -sm "$deps" | cut -f1)
  (( mib < 64 )) || { echo "gpu_check.sh: $deps is $mib MiB, over the 64 MiB a device call carries" >&2; exit 1; }
  echo "gpu_check.sh: prepared $deps ($mib MiB): $(ls "$deps/include" | tr '\n' ' ')and GoogleTest's sources"
}

run() {
  [[ -d $deps/include ]] || { echo "gpu_check.sh: $deps is not prepared (scripts/gpu_check.sh prepare)" >&2; exit 1; }
  local python=${PYTHON:-python3} jobs=${JOBS:-$(nproc)}
  echo "== the machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "(no nvidia-smi)"
  "$python" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count(), "NCCL", torch.cuda.nccl.version() if torch.cuda.is_available() else None)'
  echo "== GoogleTest from $deps/src/googletest"
  cmake -S "$deps/src/googletest" -B "$deps/build-gtest" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$deps" >/dev/null
  cmake --build "$deps/build-gtest" -j "$jobs" --target install >/dev/null
  echo "== dualpipe against $("$python" -c 'import torch; print(torch.__file__)')"
  local torch_prefix
  torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDUALPIPE_BUILD_BENCH=OFF \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$deps" -DGLOO_INCLUDE_DIR="$deps/include" \
    -DCMAKE_CXX_FLAGS="-isystem $deps/include" | grep -E '^-- dualpipe:'
  cmake --build build-gpu -j "$jobs" --target dualpipe dualpipe-train-worker test_runtime test_train
  echo "== linked CUDA libraries of build-gpu/dualpipe-train-worker"
  ldd build-gpu/dualpipe-train-worker | grep -E 'libtorch_cuda|libc10_cuda|nccl' || { echo "not linked" >&2; exit 1; }
  echo "== the runtime's and the training library's tests on this machine's PyTorch"
  local failed=0
  build-gpu/test_runtime --gtest_brief=1 || failed=1
  build-gpu/test_train --gtest_brief=1 || failed=1
  echo "== dualpipe train --device cuda"
  build-gpu/dualpipe train --device cuda --ranks 2 --schedule 1f1b --steps 2 --layers 2 --hidden 32 --heads 2 \
    --seq-len 16 --trace '' --sample-tokens 0 && echo "exit 0" || echo "exit $?"
  echo "== dualpipe train --backend nccl with CPU stages (must be refused)"
  build-gpu/dualpipe train --backend nccl --ranks 2 --steps 1 && failed=1 || echo "refused, exit $?"
  (( failed == 0 )) && echo "gpu_check.sh: PASS" || { echo "gpu_check.sh: FAIL" >&2; exit 1; }
}

case $mode in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/gpu_check.sh prepare|run [DIR]" >&2; exit 2 ;;
esac
