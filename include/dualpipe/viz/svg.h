// Timeline pictures as self-contained SVG: no scripts, external fonts or images, so the file can be put in
// documentation, attached to an issue or opened in any browser as is.
//
// One or several timelines are stacked on one shared time axis (a comparison). Each action is one cell:
//   <g class="cell F" data-rank="0" data-index="3" data-action="0F3" data-start="3" data-end="4"
//      data-direction="0"><title>...</title><rect class="box" .../><text>3</text></g>
// An overlapped pair is one framed cell made of two halves (rect.half.fwd, rect.half.bwd) and a frame
// (rect.box). The box of every cell spans exactly [start, end] on the time axis, so widths are proportional
// to durations. Idle time is the empty light band of a row.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dualpipe/viz/timeline.h"

namespace dualpipe {

// The widest picture render_svg draws (pixels). The grid and axis labels grow with the width, so an unbounded
// width is unbounded work; 20000 px is about ten 4K screens side by side.
constexpr int kMinSvgWidth = 300;
constexpr int kMaxSvgWidth = 20000;
// The most cells (actions) one picture holds: each is ~350 bytes of SVG, so 250,000 make ~90 MB.
constexpr std::size_t kMaxSvgCells = 250'000;

struct SvgOptions {
  std::string title;                 // first line; empty: the timeline's title (one timeline) or "comparison"
  std::vector<std::string> subtitle;  // lines under the title (costs, parameters); one timeline adds its summary
  std::vector<std::string> notes;     // lines under the picture ("skipped: chimera (needs M a multiple of R)")
  int width = 0;  // total width in pixels, kMinSvgWidth..kMaxSvgWidth; 0 picks one where short cells hold their numbers
  bool tooltips = true;  // a <title> per cell: action, start, end, duration (browsers show it on hover)
};

// Throws InvalidArgument when there is nothing to draw, the timelines mix time units or the width is too
// small to draw in.
std::string render_svg(const std::vector<Timeline>& timelines, const SvgOptions& options = {});

// The tooltip text of one cell: "(0F3;3B5) overlapped forward 0F3 + backward 3B5 | start 3 | end 6 | duration 3".
std::string describe_cell(const TimelineCell& cell, const std::string& time_unit);

}  // namespace dualpipe
