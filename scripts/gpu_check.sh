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
# runtime's CUDA tests (tests/runtime/test_cuda_stages.cpp: every schedule kind with CUDA stages and a stream per
# rank, bit-identical to one stream; an overlapped pair's two streams timed with CUDA events), a few steps of the
# transformer with --device cuda, the MoE transformer with expert parallelism on the GPU, the refusals, torch.profiler
# phases with exchanges on a side stream read by `dualpipe profile` (checked against CUDA events), a run's
# --kineto-trace read by `plan --from-kineto`, and dualpipe.DualPipe/DualPipeV from Python with the ranks sharing
# the GPU (built there; needs Python.h).
# DUALPIPE_GPU_BIN=DIR skips the build and runs DIR's dualpipe, dualpipe-train-worker and test_runtime instead:
# binaries built elsewhere against the same PyTorch release (a GPU lent for minutes). DUALPIPE_GPU_PYTHON=0 skips
# the Python section.
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
  # pybind11's headers and CMake package, for the Python package's extensions (dualpipe.DualPipe on the GPU).
  source scripts/env.sh
  cp -r "$("$DUALPIPE_PYTHON" -c 'import os, pybind11; print(os.path.dirname(pybind11.__file__))')" "$deps/"
  local mib
  mib=$(du -sm "$deps" | cut -f1)
  (( mib < 64 )) || { echo "gpu_check.sh: $deps is $mib MiB, over the 64 MiB a device call carries" >&2; exit 1; }
  echo "gpu_check.sh: prepared $deps ($mib MiB): $(ls "$deps/include" | tr '\n' ' ')and GoogleTest's sources"
}

run() {
  local python=${PYTHON:-python3} jobs=${JOBS:-$(nproc)} bin=${DUALPIPE_GPU_BIN:-}
  echo "== the machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "(no nvidia-smi)"
  "$python" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count(), "NCCL", torch.cuda.nccl.version() if torch.cuda.is_available() else None)'
  local torch_lib
  torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  if [[ -n $bin ]]; then
    echo "== prebuilt binaries from $bin, on this machine's PyTorch ($torch_lib)"
    export LD_LIBRARY_PATH=$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  else
    [[ -d $deps/include ]] || { echo "gpu_check.sh: $deps is not prepared (scripts/gpu_check.sh prepare)" >&2; exit 1; }
    echo "== GoogleTest from $deps/src/googletest"
    cmake -S "$deps/src/googletest" -B "$deps/build-gtest" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$deps" >/dev/null
    cmake --build "$deps/build-gtest" -j "$jobs" --target install >/dev/null
    echo "== dualpipe against $("$python" -c 'import torch; print(torch.__file__)')"
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDUALPIPE_BUILD_BENCH=OFF \
      -DCMAKE_PREFIX_PATH="$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)');$deps" \
      -DGLOO_INCLUDE_DIR="$deps/include" -DCMAKE_CXX_FLAGS="-isystem $deps/include" | grep -E '^-- dualpipe:'
    local start=$SECONDS
    cmake --build build-gpu -j "$jobs" --target dualpipe dualpipe-train-worker test_runtime
    echo "built in $((SECONDS - start)) s"
    bin=build-gpu
  fi
  echo "== linked CUDA libraries of $bin/dualpipe-train-worker"
  ldd "$bin/dualpipe-train-worker" | grep -E 'libtorch_cuda|libc10_cuda' || { echo "not linked" >&2; exit 1; }
  local failed=0
  echo "== the runtime's CUDA tests (cuBLAS in its deterministic workspace mode, as PyTorch's reproducibility notes ask)"
  CUBLAS_WORKSPACE_CONFIG=:4096:8 "$bin/test_runtime" --gtest_filter='*CudaStages*:*CudaOverlap*' --gtest_brief=1 \
    || failed=1
  echo "== dualpipe train --device cuda --backend gloo: 2 ranks sharing the GPU, 4 steps"
  "$bin/dualpipe" train --device cuda --backend gloo --ranks 2 --schedule dualpipev --steps 4 --layers 4 \
    --hidden 64 --heads 4 --seq-len 32 --data docs --trace '' --sample-tokens 0 || failed=1
  echo "== the same on the CPU (the losses above should match to rounding)"
  "$bin/dualpipe" train --device cpu --ranks 2 --schedule dualpipev --steps 4 --layers 4 \
    --hidden 64 --heads 4 --seq-len 32 --data docs --trace '' --sample-tokens 0 || failed=1
  echo "== MoE with expert parallelism on the GPU: P=2 x DP=2 (EP=2), 4 ranks sharing it, DualPipe's overlap on"
  echo "   (the halves at once, on two streams) and off (each step 1 checked against the single-process reference)"
  local overlap
  for overlap in "" --no-fb-overlap; do
    echo "-- dualpipe ${overlap:-(overlap on)}"
    "$bin/dualpipe" train --device cuda --backend gloo --schedule dualpipe --pp 2 --dp 2 --ep 2 --experts 4 \
      --top-k 2 --steps 4 --layers 4 --hidden 64 --heads 4 --seq-len 32 --data docs --trace '' --sample-tokens 0 \
      $overlap | grep -E 'step matches|^\[rank 0\] +[1-4] |identical|mean step' || failed=1
  done
  echo "== tensor and sequence parallelism on the GPU: P=2 x TP=2 with --sp, 4 ranks sharing it over Gloo (step 1"
  echo "   checked against the single-process reference; the tensor group's traffic against its prediction)"
  "$bin/dualpipe" train --device cuda --backend gloo --schedule dualpipe --pp 2 --tp 2 --sp --steps 4 --layers 4 \
    --hidden 64 --heads 4 --seq-len 32 --data docs --trace '' --sample-tokens 0 \
    | grep -E 'step matches|^\[rank 0\] +[1-4] |traffic|mean step' || failed=1
  echo "== refused: --backend nccl with CPU stages, and --device cuda over NCCL with more ranks than GPUs"
  "$bin/dualpipe" train --backend nccl --ranks 2 --steps 1 && failed=1 || echo "refused, exit $?"
  "$bin/dualpipe" train --device cuda --ranks 2 --steps 1 && failed=1 || echo "refused, exit $?"
  echo "== --device cuda over NCCL (the default) on one rank: the NCCL groups and the two channels are made, and"
  echo "   train on the GPU; nothing crosses between ranks (NCCL refuses two ranks on one GPU)"
  "$bin/dualpipe" train --device cuda --schedule 1f1b --ranks 1 --steps 4 --layers 4 --hidden 64 --heads 4 \
    --seq-len 32 --data docs --trace '' --sample-tokens 0 | grep -E 'channels|^\[rank 0\] +[0-4] |mean step' || failed=1
  echo "== torch.profiler phases with the exchanges on a side stream (tests/python/kineto_gpu_phases.py), read by"
  echo "   dualpipe profile --kineto and checked against CUDA events"
  mkdir -p build-gpu-kineto && "$python" tests/python/kineto_gpu_phases.py build-gpu-kineto "$bin/dualpipe" || failed=1
  echo "== dualpipe train --kineto-trace on the GPU, and plan --from-kineto: the step predicted from its traces"
  rm -rf build-gpu-kineto/train && "$bin/dualpipe" train --device cuda --backend gloo --ranks 2 --schedule dualpipe \
    --steps 6 --kineto-steps 4 --kineto-trace build-gpu-kineto/train --layers 4 --data docs --trace '' \
    --sample-tokens 0 | grep -E 'mean step|profiler traces' || failed=1
  "$bin/dualpipe" plan --from-kineto build-gpu-kineto/train | grep -E '^  [A-Za-z0-9]+ = |traced run' || failed=1
  python_on_gpu "$python" "$jobs" || failed=1
  (( failed == 0 )) && echo "gpu_check.sh: PASS" || { echo "gpu_check.sh: FAIL" >&2; exit 1; }
}

# dualpipe.DualPipe and DualPipeV from Python on the GPU: the package's extensions built against this machine's
# Python and PyTorch into build-gpu-python/, then the reference's example checks (tests/python/deepseek_examples.py)
# with 4 ranks sharing the GPU over Gloo and on a one-rank NCCL group, and the module recipes
# (tests/python/module_recipes.py) on the GPU. Skipped, saying why, where the Python has no headers to build against.
python_on_gpu() {
  local python=$1 jobs=$2 include
  echo "== dualpipe.DualPipe and DualPipeV on the GPU: the reference's example checks, 4 ranks sharing it over Gloo"
  [[ ${DUALPIPE_GPU_PYTHON:-1} != 0 ]] || { echo "skipped (DUALPIPE_GPU_PYTHON=0)"; return 0; }
  include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  if [[ ! -f $include/Python.h || ! -d $deps/pybind11 ]]; then
    echo "skipped: no $include/Python.h to build the extension against, or $deps/pybind11 not prepared"
    return 0
  fi
  local start=$SECONDS package
  cmake -S . -B build-gpu-python -DCMAKE_BUILD_TYPE=Release -DDUALPIPE_PYTHON_PACKAGE=ON \
    -DPython_EXECUTABLE="$(command -v "$python")" -Dpybind11_DIR="$deps/pybind11/share/cmake/pybind11" \
    -DCMAKE_PREFIX_PATH="$deps" -DGLOO_INCLUDE_DIR="$deps/include" -DCMAKE_CXX_FLAGS="-isystem $deps/include" \
    | grep -E '^-- dualpipe:' || true
  cmake --build build-gpu-python -j "$jobs" --target _core _runtime >/dev/null || { echo "build failed" >&2; return 1; }
  package=build-gpu-python/site
  rm -rf "$package" && mkdir -p "$package" && cp -r python/dualpipe "$package/"
  cp build-gpu-python/_core*.so build-gpu-python/_runtime*.so "$package/dualpipe/"
  echo "extensions built in $((SECONDS - start)) s"
  local kind case status=0
  for kind in dualpipev dualpipe; do
    CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONPATH="$package" "$python" tests/python/deepseek_examples.py "$kind" \
      --device cuda || status=1
  done
  echo "== dualpipe.DualPipeV over a one-rank NCCL group (the channels made over NCCL; NCCL takes one rank per GPU)"
  CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONPATH="$package" "$python" tests/python/deepseek_examples.py dualpipev \
    --device cuda --backend nccl --ranks 1 || status=1
  echo "== the modules people write on the GPU (tests/python/module_recipes.py), bf16 autocast included"
  for case in linear checkpoint checkpoint-store compile autocast dp; do
    CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONPATH="$package" "$python" tests/python/module_recipes.py "$case" \
      --device cuda || status=1
  done
  echo "== real models on the GPU (tests/python/real_model_checks.py): Llama 3 and MoE stages, the PyTorch schedule"
  echo "   class, and PP 2 x DP 2 with the stages in FSDP2's fully_shard (four Gloo ranks sharing the GPU)"
  for case in llama3 deepseek-v3 shapes schedule fsdp; do
    CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONPATH="$package" "$python" tests/python/real_model_checks.py "$case" \
      --device cuda || status=1
  done
  return $status
}

case $mode in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: scripts/gpu_check.sh prepare|run [DIR]" >&2; exit 2 ;;
esac
