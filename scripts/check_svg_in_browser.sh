#!/bin/sh
# Renders timeline SVGs in a real browser (headless Chromium) and checks the screenshots are not blank.
#
#   scripts/check_svg_in_browser.sh [--dualpipe BIN] [--out DIR] [FILE.svg ...]
#
# Without files it draws DualPipe at 8 ranks x 40 micro-batches and a comparison of all schedules at 8 ranks
# with `dualpipe draw`, and a training run from tests/viz/data/small_run.jsonl with `dualpipe plot`
# (BIN: --dualpipe, else $DUALPIPE_BIN, else build/dualpipe). Screenshots go to DIR
# (default: a temporary directory, printed) as FILE.png, sized to the whole picture.
# Exit status: 0 all pictures have content, 1 a picture is blank or a step failed, 77 Chromium is not
# installed (ctest reports the test as skipped; install it with `apt-get install chromium`).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bin=${DUALPIPE_BIN:-$here/../build/dualpipe}
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dualpipe) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) echo "check_svg_in_browser: unknown option $1" >&2; exit 1 ;;
    *) break ;;
  esac
done

browser=""
for candidate in chromium chromium-browser google-chrome; do
  if command -v "$candidate" >/dev/null 2>&1; then browser=$candidate; break; fi
done
if [ -z "$browser" ]; then
  echo "SKIP: no chromium found; install it (apt-get install chromium) to render the pictures in a browser"
  exit 77
fi

[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/dualpipe-svg-check.XXXXXX")
mkdir -p "$out"
profile=$(mktemp -d "${TMPDIR:-/tmp}/dualpipe-chromium-profile.XXXXXX")
trap 'rm -rf "$profile"' EXIT

if [ $# -eq 0 ]; then
  if [ ! -x "$bin" ]; then
    echo "check_svg_in_browser: dualpipe binary '$bin' not found; build it or pass --dualpipe BIN" >&2
    exit 1
  fi
  "$bin" draw --kind dualpipe --ranks 8 --microbatches 40 -o "$out/dualpipe-8x40.svg"
  "$bin" draw --compare all --ranks 8 --microbatches 16 -o "$out/compare-8.svg" 2>/dev/null
  "$bin" plot --metrics "$here/../tests/viz/data/small_run.jsonl" -o "$out/run-plot.svg"
  set -- "$out/dualpipe-8x40.svg" "$out/compare-8.svg" "$out/run-plot.svg"
fi

status=0
for svg in "$@"; do
  # The window is the picture's own size (from the root element), so the screenshot shows all of it.
  size=$(sed -n '1,3s/.*<svg[^>]* width="\([0-9]*\)" height="\([0-9]*\)".*/\1,\2/p' "$svg" | head -n 1)
  [ -n "$size" ] || size=1600,900
  png="$out/$(basename "$svg" .svg).png"
  rm -f "$png"
  # Everything that could reach the network is off: the picture must render from the file alone.
  "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$profile" \
    --screenshot="$png" --window-size="$size" "file://$(cd "$(dirname "$svg")" && pwd)/$(basename "$svg")" \
    >"$out/chromium.log" 2>&1 || true
  if [ ! -s "$png" ]; then
    echo "check_svg_in_browser: chromium wrote no screenshot for $svg (log: $out/chromium.log)" >&2
    status=1
    continue
  fi
  python3 "$here/png_not_blank.py" "$png" || status=1
done
echo "screenshots in $out"
exit $status
