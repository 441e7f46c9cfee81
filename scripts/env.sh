# Sourced by the scripts: where the Python environment with the pinned PyTorch lives (requirements.txt).
#   DUALPIPE_VENV    the virtual environment scripts/setup.sh makes and reuses (outside the source tree)
#   DUALPIPE_PYTHON  the Python whose PyTorch the build uses; set it to build against your own PyTorch 2
#                    (>= 2.11) instead, e.g. DUALPIPE_PYTHON=$(command -v python3) scripts/build.sh
DUALPIPE_VENV=${DUALPIPE_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/dualpipe/venv}
DUALPIPE_PYTHON=${DUALPIPE_PYTHON:-$DUALPIPE_VENV/bin/python}
export DUALPIPE_VENV DUALPIPE_PYTHON

# Prints the CMake prefix of $DUALPIPE_PYTHON's PyTorch (for -DCMAKE_PREFIX_PATH), or fails saying what to run.
torch_cmake_prefix() {
  [[ -x $DUALPIPE_PYTHON ]] || { echo "no Python at $DUALPIPE_PYTHON: run scripts/setup.sh first" >&2; return 1; }
  "$DUALPIPE_PYTHON" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null ||
    { echo "$DUALPIPE_PYTHON cannot import torch: run scripts/setup.sh first" >&2; return 1; }
}
