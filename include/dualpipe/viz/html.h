// The timeline picture as one self-contained HTML page: the SVG of svg.h inline (every cell with its tooltip:
// action, start, end, duration) and a table of per-rank numbers under it. No scripts, no external files.
#pragma once

#include <string>
#include <vector>

#include "dualpipe/viz/svg.h"
#include "dualpipe/viz/timeline.h"

namespace dualpipe {

std::string render_html(const std::vector<Timeline>& timelines, const SvgOptions& options = {});

// "svg" or "html", by a picture file's name (.svg, .html or .htm, in any case); throws InvalidArgument naming the
// path otherwise.
std::string picture_format(const std::string& path);

// render_svg or render_html, as picture_format(path) says.
std::string render_picture(const std::string& path, const std::vector<Timeline>& timelines,
                           const SvgOptions& options = {});

}  // namespace dualpipe
