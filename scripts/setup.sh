#!/usr/bin/env bash
# Installs what dualpipe needs. Idempotent: one line of output when everything is there.
#   - From Debian 12's packages: the compiler and build tools, the C++ libraries (GoogleTest, Google Benchmark,
#     CLI11, nlohmann-json, Gloo's headers), Chromium for the picture test, Clang's libFuzzer, iproute2 for the
#     two-node test bed, the corpus. As root, or through sudo.
#   - From PyPI: the pinned PyTorch 2 (requirements.txt) into a virtual environment outside the source tree
#     (scripts/env.sh: $DUALPIPE_VENV, default ~/.local/share/dualpipe/venv). An environment that already holds
#     every pin is reused as it is.
#   The Python package `dualpipe` of this checkout (pyproject.toml, docs/python.md) is installed by scripts/build.sh,
#   from the main build's extensions (scripts/install_python_package.sh), so that each source is compiled once.
#     scripts/setup.sh              both
#     scripts/setup.sh --packages   only Debian's packages; --python: only the environment (scripts/ci.sh builds the
#                                   fuzz targets between the two)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
packages_step=1 python_step=1
for arg in "$@"; do
  case $arg in
    --packages) python_step=0 ;;
    --python) packages_step=0 ;;
    *) echo "setup.sh: unknown argument '$arg' (the options are --packages and --python)" >&2; exit 2 ;;
  esac
done

packages=(
  g++ make cmake ccache git python3 python3-venv
  python3-dev           # Python.h, for the Python package's extension (pip install .)
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
  libgloo-dev           # Gloo's headers: c10d's ProcessGroupGloo.hpp includes them, the PyPI wheel has none
  fortunes              # the default training corpus of dualpipe train (/usr/share/games/fortunes)
  chromium              # renders the SVG pictures in the browser test
  clang libclang-rt-dev # libFuzzer, for the fuzz targets (scripts/fuzz.sh, run by scripts/test.sh)
  iproute2              # ip netns, tc: the two-node test bed (scripts/testbed.sh)
)

missing=()
(( packages_step )) || packages=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  as_root=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup.sh: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
    as_root=(sudo)
  fi
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
  echo "setup.sh: Debian packages done"
fi

(( python_step )) || exit 0

# The pins of requirements.txt that the environment lacks (all of them when there is no environment).
unmet_pins() {
  [[ -x $DUALPIPE_VENV/bin/python ]] || { echo "no environment"; return; }
  "$DUALPIPE_VENV/bin/python" - requirements.txt <<'PY'
import importlib.metadata as md, re, sys
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, version = re.split(r"==", line)
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    if have is None or have.split("+")[0] != version:
        print(f"{name}=={version} (have {have or 'none'})")
PY
}
unmet=$(unmet_pins)
if [[ -n $unmet ]]; then
  echo "setup.sh: installing into $DUALPIPE_VENV from PyPI: $(echo $unmet | tr '\n' ' ')"
  [[ -x $DUALPIPE_VENV/bin/python ]] || python3 -m venv "$DUALPIPE_VENV"
  "$DUALPIPE_VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt
  unmet=$(unmet_pins)
  [[ -z $unmet ]] || { echo "setup.sh: after pip install, $DUALPIPE_VENV still lacks: $unmet" >&2; exit 1; }
  echo "setup.sh: PyTorch $("$DUALPIPE_VENV/bin/python" -c 'import torch; print(torch.__version__)') ready"
fi
