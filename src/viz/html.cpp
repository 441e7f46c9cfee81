#include "dualpipe/viz/html.h"

#include <algorithm>
#include <cctype>

#include "dualpipe/util/error.h"

#include "viz/text_util.h"

namespace dualpipe {
namespace {

using viz::xml_escape;

// Busy, idle and span of every rank: the numbers behind the bubble, for people who want them exact.
std::string rank_table(const Timeline& t) {
  const double makespan = t.end() - t.begin();
  std::string out = "<table><caption>" + xml_escape(t.title) +
                    "</caption>\n<tr><th>rank</th><th>actions</th><th>busy</th><th>idle</th><th>span</th></tr>\n";
  for (const TimelineRow& row : t.rows) {
    double busy = 0, first = 0, last = 0;
    for (std::size_t i = 0; i < row.cells.size(); ++i) {
      busy += row.cells[i].duration();
      first = i ? std::min(first, row.cells[i].start) : row.cells[i].start;
      last = std::max(last, row.cells[i].end);
    }
    out += "<tr><td>" + xml_escape(row.label) + "</td><td>" + std::to_string(row.cells.size()) + "</td><td>" +
           format_time(busy, t.time_unit) + "</td><td>" + format_time(makespan - busy, t.time_unit) +
           "</td><td>" + format_time(last - first, t.time_unit) + "</td></tr>\n";
  }
  return out + "</table>\n";
}

}  // namespace

std::string render_html(const std::vector<Timeline>& timelines, const SvgOptions& options) {
  SvgOptions svg_options = options;
  svg_options.tooltips = true;  // the page's reason to exist: hover a cell to read its times
  const std::string svg = render_svg(timelines, svg_options);
  const std::string title = !options.title.empty() ? options.title
                            : timelines.size() == 1 ? timelines[0].title
                                                    : "schedules compared";
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + xml_escape(title) +
      "</title>\n<style>\n"
      "body { font-family: \"DejaVu Sans\", \"Liberation Sans\", Arial, Helvetica, sans-serif; margin: 16px; "
      "color: #222; }\n"
      ".picture { overflow-x: auto; }\n"
      "g.cell:hover rect.box { stroke: #d62728; stroke-width: 2; }\n"
      "table { border-collapse: collapse; margin: 12px 24px 12px 0; display: inline-table; "
      "vertical-align: top; font-size: 13px; }\n"
      "caption { text-align: left; font-weight: bold; padding-bottom: 4px; }\n"
      "td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }\n"
      "</style>\n</head>\n<body>\n"
      "<p>Hover a cell for its action, start, end and duration.</p>\n<div class=\"picture\">\n";
  out += svg;
  out += "</div>\n<div class=\"tables\">\n";
  for (const Timeline& t : timelines) out += rank_table(t);
  out += "</div>\n</body>\n</html>\n";
  return out;
}

std::string picture_format(const std::string& path) {
  const std::size_t dot = path.find_last_of('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  DUALPIPE_REQUIRE(ext == "svg" || ext == "html" || ext == "htm", "output '", path,
                   "': draw writes SVG or HTML, so the file name must end in .svg or .html");
  return ext == "svg" ? "svg" : "html";
}

std::string render_picture(const std::string& path, const std::vector<Timeline>& timelines,
                           const SvgOptions& options) {
  return picture_format(path) == "svg" ? render_svg(timelines, options) : render_html(timelines, options);
}

}  // namespace dualpipe
