#!/usr/bin/env bash
# Installs what dualpipe needs from Debian 12's packages. Idempotent: quiet when everything is there.
#   scripts/setup.sh    build, test and benchmark dependencies (LibTorch CPU and Gloo, Chromium for the picture test,
#                       Clang's libFuzzer, iproute2 for the two-node test bed)
set -euo pipefail

packages=(
  g++ make cmake ccache git python3
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
  libtorch-dev libgloo-dev
  fortunes              # the default training corpus of dualpipe train (/usr/share/games/fortunes)
  chromium              # renders the SVG pictures in the browser test
  clang libclang-rt-dev # libFuzzer, for the fuzz targets (scripts/fuzz.sh, run by scripts/test.sh)
  iproute2              # ip netns, tc: the two-node test bed (scripts/testbed.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup.sh: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
echo "setup.sh: done"
