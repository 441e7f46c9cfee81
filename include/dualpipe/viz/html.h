// The timeline picture as one self-contained HTML page: the SVG of svg.h inline (every cell with its tooltip:
// action, start, end, duration) and a table of per-rank numbers under it. No scripts, no external files.
#pragma once

#include <string>
#include <vector>

#include "dualpipe/viz/svg.h"
#include "dualpipe/viz/timeline.h"

namespace dualpipe {

std::string render_html(const std::vector<Timeline>& timelines, const SvgOptions& options = {});

}  // namespace dualpipe
