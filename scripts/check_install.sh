#!/usr/bin/env bash
# Issue 9: the libraries are installable. Installs a build tree into a temporary prefix, builds examples/ against it
# as an outside project would (find_package(dualpipe), dualpipe::runtime), runs the example and the installed
# `dualpipe`. Registered as the ctest test install_and_build_example (cmake/install.cmake).
#
#   scripts/check_install.sh [BUILD_DIR]     (default: build; must be built already)
#
# Exit 0: passed; 1: failed; 77: skipped (something outside the project is missing: cmake, a C++ compiler, a build
# configured with LibTorch).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source_dir="$(dirname "$here")"
build_dir="${1:-$source_dir/build}"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v cmake >/dev/null || skip "cmake is not installed"
[[ -f "$build_dir/CMakeCache.txt" ]] || fail "$build_dir is not a configured build directory"
build_dir="$(cd "$build_dir" && pwd)"
grep -q '^DUALPIPE_WITH_TORCH:BOOL=ON' "$build_dir/CMakeCache.txt" ||
  skip "$build_dir was configured without LibTorch (DUALPIPE_WITH_TORCH=OFF): there is no dualpipe::runtime"
sanitize="$(sed -n 's/^DUALPIPE_SANITIZE:STRING=//p' "$build_dir/CMakeCache.txt")"
[[ -z "$sanitize" ]] || skip "$build_dir is sanitized ($sanitize): its libraries need the sanitizer runtime to link"
compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
[[ -n "$compiler" && -x "$compiler" ]] || compiler="$(command -v c++ || true)"
[[ -n "$compiler" ]] || skip "no C++ compiler"

# Inside the build folder, at the same place every time: the example's compile commands are then the same from one
# run (and one fresh clone) to the next, so ccache serves them (a random folder cost a cold LibTorch compile, 57 s).
tmp="$build_dir/install-check"
rm -rf "$tmp" && mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

echo "== cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
echo "installed $(find "$prefix" -type f | wc -l) files"

config="$(find "$prefix" -path '*/cmake/dualpipe/dualpipeConfig.cmake' | head -n 1)"
[[ -n "$config" ]] || fail "no dualpipeConfig.cmake under $prefix"
for file in include/dualpipe/schedule/schedule.h include/dualpipe/runtime/executor.h bin/dualpipe bin/dualpipe-train-worker; do
  [[ -e "$prefix/$file" ]] || fail "$prefix/$file was not installed"
done
# The package must name nothing of the source or build tree: it is used after they are gone.
if grep -rl -e "$source_dir/" -e "$build_dir/" "$(dirname "$config")"; then
  fail "the installed package refers to the source or build tree (files above)"
fi

# The example, as an outside project: it sees only the installed tree (and LibTorch, nlohmann_json on the system).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths relative to the folder above the build folder, as in scripts/build.sh. The installed headers are new at
  # every run: ccache's sloppiness lets it trust their contents rather than their times.
  export CCACHE_BASEDIR="$(dirname "$build_dir")" CCACHE_NOHASHDIR=1
  export CCACHE_SLOPPINESS=include_file_mtime,include_file_ctime,time_macros
fi
torch_dir="$(sed -n 's/^Torch_DIR:PATH=//p' "$build_dir/CMakeCache.txt")"
echo "== configure examples/ against $prefix (Torch_DIR=$torch_dir)"
cmake -S "$source_dir/examples" -B "$tmp/examples" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" -DTorch_DIR="$torch_dir" -DCMAKE_CXX_COMPILER="$compiler" "${launcher[@]}" \
      >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; fail "configuring examples/ failed"; }
grep -E '^-- (Found|Configuring done)' "$tmp/configure.log" || true
dualpipe_dir="$(sed -n 's/^dualpipe_DIR:PATH=//p' "$tmp/examples/CMakeCache.txt")"
[[ "$dualpipe_dir" == "$prefix"/* ]] || fail "examples/ found dualpipe in '$dualpipe_dir', not under $prefix"
echo "dualpipe_DIR=$dualpipe_dir"
if grep -q -F "$source_dir/include" "$tmp/examples/CMakeFiles/minimal_dualpipe.dir/flags.make"; then
  fail "examples/ compiled with the source tree's headers"
fi

echo "== build examples/"
start=$SECONDS
cmake --build "$tmp/examples" -j2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; fail "building examples/ failed"; }
echo "built minimal_dualpipe in $((SECONDS - start)) s"

echo "== run minimal_dualpipe (two ranks as threads)"
output="$(env -u RANK "$tmp/examples/minimal_dualpipe" 2>&1)" || { echo "$output" >&2; fail "minimal_dualpipe failed"; }
echo "$output"
# One loss per micro-batch (4), from both ranks, each a finite number.
losses="$(grep -cE '^rank [01] micro-batch [0-3] loss [0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?$' <<<"$output" || true)"
[[ "$losses" == 4 ]] || fail "expected 4 finite losses from minimal_dualpipe, got $losses"
for rank in 0 1; do
  grep -q "^rank $rank " <<<"$output" || fail "no loss from rank $rank"
done

# A second LibTorch on the machine: Debian's libtorch-dev puts its Caffe2 package and its libc10.so in system
# folders, which LibTorch's TorchConfig.cmake searches (find_package(Caffe2), find_library(c10)) before its own; the
# examples then linked that libtorch.so and libc10.so and failed with undefined references. Here another build's
# Caffe2 package (a torch target) and libc10.so, in a prefix searched first.
echo "== configure and link examples/ beside another LibTorch"
other="$tmp/other-libtorch"
mkdir -p "$other/lib" "$other/share/cmake/Caffe2"
echo 'int another_libtorch_c10;' >"$other/c10.cpp"
"$compiler" -shared -fPIC -o "$other/lib/libc10.so" "$other/c10.cpp"
printf '%s\n' 'add_library(torch SHARED IMPORTED)' \
  'set_target_properties(torch PROPERTIES IMPORTED_CONFIGURATIONS RELEASE' \
  '                      IMPORTED_LOCATION_RELEASE "${CMAKE_CURRENT_LIST_DIR}/../../../lib/libc10.so")' \
  'set(Caffe2_MAIN_LIBS)' >"$other/share/cmake/Caffe2/Caffe2Config.cmake"
# The same build folder configured again, what it found forgotten (-U): the example is only linked again.
cmake -S "$source_dir/examples" -B "$tmp/examples" -U c10_LIBRARY -U C10_CUDA_LIBRARY -U TORCH_LIBRARY -U Caffe2_DIR \
      -DCMAKE_PREFIX_PATH="$other;$prefix" >"$tmp/configure-beside.log" 2>&1 ||
  { cat "$tmp/configure-beside.log" >&2; fail "configuring examples/ beside another LibTorch failed"; }
c10="$(sed -n 's/^c10_LIBRARY:FILEPATH=//p' "$tmp/examples/CMakeCache.txt")"
own_c10="$(dirname "$(dirname "$(dirname "$torch_dir")")")/lib/libc10.so"
[[ -n "$c10" && "$(realpath "$c10")" == "$(realpath "$own_c10")" ]] ||
  fail "beside another LibTorch, examples/ took libc10 from '$c10', not from the LibTorch of $torch_dir"
caffe2="$(sed -n 's/^Caffe2_DIR:PATH=//p' "$tmp/examples/CMakeCache.txt")"
[[ -n "$caffe2" && "$(realpath "$caffe2")" == "$(realpath "$(dirname "$torch_dir")/Caffe2")" ]] ||
  fail "beside another LibTorch, examples/ took Caffe2 from '$caffe2', not from the LibTorch of $torch_dir"
grep -E 'belongs to another LibTorch' "$tmp/configure-beside.log" || true
cmake --build "$tmp/examples" -j2 --target minimal_dualpipe >"$tmp/build-beside.log" 2>&1 ||
  { cat "$tmp/build-beside.log" >&2; fail "linking examples/ beside another LibTorch failed"; }
env -u RANK "$tmp/examples/minimal_dualpipe" >/dev/null 2>&1 || fail "minimal_dualpipe beside another LibTorch failed"
echo "linked and ran with Caffe2_DIR=$caffe2 c10_LIBRARY=$c10"
# Named explicitly, the other one is refused at configure time, naming it (CMake wraps the message: read flat).
if cmake -S "$source_dir/examples" -B "$tmp/examples-mixed" -DCMAKE_PREFIX_PATH="$prefix" -DTorch_DIR="$torch_dir" \
         -Dc10_LIBRARY="$other/lib/libc10.so" -DCMAKE_CXX_COMPILER="$compiler" >"$tmp/configure-mixed.log" 2>&1; then
  fail "examples/ configured with another LibTorch's libc10.so ($other/lib/libc10.so)"
fi
refusal="$(tr -s ' \n' ' ' <"$tmp/configure-mixed.log")"
[[ "$refusal" == *"links $other/lib/libc10.so, a library of another LibTorch"* ]] ||
  { cat "$tmp/configure-mixed.log" >&2; fail "the refusal of a mixed LibTorch does not name the other libc10.so"; }
echo "refused: -Dc10_LIBRARY=$other/lib/libc10.so"

echo "== $prefix/bin/dualpipe --help"
help="$("$prefix/bin/dualpipe" --help 2>&1)" || { echo "$help" >&2; fail "installed dualpipe --help failed"; }
head -n 3 <<<"$help"
grep -q 'train' <<<"$help" || fail "installed dualpipe --help does not list train"

echo "PASS: installed into a temporary prefix, built and ran examples/ against it"
