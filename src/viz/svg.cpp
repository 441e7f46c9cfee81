#include "dualpipe/viz/svg.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "dualpipe/util/error.h"
#include "dualpipe/util/number_format.h"
#include "viz/palette.h"
#include "viz/text_util.h"

namespace dualpipe {
namespace {

using namespace viz;  // the pictures' shared helpers: text_util.h, palette.h

constexpr double kMarginLeft = 66;
constexpr double kMarginRight = 28;
constexpr double kRowHeight = 18;
constexpr double kRowPitch = 22;
constexpr double kMinCellPixels = 18;  // the width a two-digit micro-batch number needs at the base font
constexpr double kFontSize = 10.5;

// The horizontal mapping shared by every timeline of the picture. Pixel positions are rounded to 1/100 px
// once, and widths are differences of rounded positions, so adjacent cells meet exactly.
struct Scale {
  double t0 = 0, t1 = 1;  // time range drawn
  double x0 = kMarginLeft;
  double pixels_per_unit = 1;
  double x(double t) const { return std::round((x0 + (t - t0) * pixels_per_unit) * 100) / 100; }
};

// The unit the axis labels are written in: microseconds become ms or s for long runs.
struct AxisUnit {
  double divisor = 1;
  std::string caption;
};

AxisUnit axis_unit(const std::string& time_unit, double range) {
  if (time_unit != "us") return {1, "time (cost units)"};
  if (range >= 2e6) return {1e6, "time (s)"};
  if (range >= 2e3) return {1e3, "time (ms)"};
  return {1, "time (us)"};
}

// A round tick step giving about one tick per `target` pixels.
double tick_step(const Scale& s, double target) { return viz::round_step(target / s.pixels_per_unit); }

// Pixels per time unit that give the short cells (the 10th percentile, pair halves counted apart) room for
// their numbers, keeping the picture between a laptop screen and a wide poster.
double auto_chart_width(const std::vector<Timeline>& timelines, double range) {
  std::vector<double> widths;
  for (const Timeline& t : timelines)
    for (const TimelineRow& row : t.rows)
      for (const TimelineCell& c : row.cells) {
        const double d = c.action.type == ActionType::Overlapped ? c.duration() * std::min(c.split, 1 - c.split)
                                                                  : c.duration();
        if (d > 0) widths.push_back(d);
      }
  if (widths.empty()) return 900;
  std::nth_element(widths.begin(), widths.begin() + widths.size() / 10, widths.end());
  const double small = widths[widths.size() / 10];
  return std::clamp(range * kMinCellPixels / small, 720.0, 3600.0);
}

// A generous guess of the width of a line of text in the picture's sans-serif font.
double text_width(const std::string& text, double font_size) { return text.size() * font_size * 0.6; }

class SvgBuilder {
 public:
  std::string& out() { return out_; }

  void text(double x, double y, const std::string& content, const std::string& attributes = "") {
    out_ += "<text x=\"" + shortest_fixed(x, 2) + "\" y=\"" + shortest_fixed(y, 2) + "\"" + (attributes.empty() ? "" : " ") +
            attributes + ">" + xml_escape(content) + "</text>\n";
  }
  void rect(double x, double y, double w, double h, const std::string& attributes) {
    out_ += "<rect x=\"" + shortest_fixed(x, 2) + "\" y=\"" + shortest_fixed(y, 2) + "\" width=\"" + shortest_fixed(w, 2) + "\" height=\"" +
            shortest_fixed(h, 2) + "\" " + attributes + "/>\n";
  }
  void line(double x1, double y1, double x2, double y2, const std::string& attributes) {
    out_ += "<line x1=\"" + shortest_fixed(x1, 2) + "\" y1=\"" + shortest_fixed(y1, 2) + "\" x2=\"" + shortest_fixed(x2, 2) + "\" y2=\"" +
            shortest_fixed(y2, 2) + "\" " + attributes + "/>\n";
  }

 private:
  std::string out_;
};

std::string fill_attr(const char* fill) { return std::string("fill=\"") + fill + "\""; }

// The micro-batch number centred in [x, x + w], shrunk to fit a narrow cell and left out only when even
// a tiny font would not fit (the tooltip and data-action still name the action).
void cell_number(SvgBuilder& svg, double x, double w, double y, int microbatch, const char* fill) {
  const std::string label = std::to_string(microbatch);
  const double needed = label.size() * 0.62 * kFontSize + 3;
  const double size = needed <= w ? kFontSize : kFontSize * w / needed;
  if (size < 5) return;
  // Font size and centring are inherited from the row; only a shrunk number carries its own size.
  std::string attributes = std::string("fill=\"") + viz::text_fill(fill) + "\"";
  if (size < kFontSize) attributes += " font-size=\"" + shortest_fixed(size, 1) + "\"";
  svg.text(x + w / 2, y + kRowHeight / 2 + size * 0.36, label, attributes);
}

void draw_cell(SvgBuilder& svg, const Scale& s, const TimelineCell& c, int panel, int rank, double y,
               const std::string& time_unit, bool tooltips) {
  const bool pair = c.action.type == ActionType::Overlapped;
  const std::string type(pair ? "pair" : type_name(c.action.type));
  svg.out() += "<g class=\"cell " + type + " d" + std::to_string(c.direction) + "\" data-timeline=\"" +
               std::to_string(panel) + "\" data-rank=\"" + std::to_string(rank) + "\" data-index=\"" +
               std::to_string(c.index) + "\" data-action=\"" + xml_escape(to_string(c.action)) +
               "\" data-start=\"" + exact(c.start) + "\" data-end=\"" + exact(c.end) + "\" data-direction=\"" +
               std::to_string(c.direction) + "\">\n";
  if (tooltips) svg.out() += "<title>" + xml_escape(describe_cell(c, time_unit)) + "</title>\n";
  const double x = s.x(c.start), w = s.x(c.end) - x;
  if (!pair) {
    const char* fill = viz::cell_fill(c.action.type, c.direction);
    svg.rect(x, y, w, kRowHeight, "class=\"box\" " + fill_attr(fill));
    cell_number(svg, x, w, y, c.action.microbatch, fill);
  } else {
    // One unit in two halves: the forward's colour, then the backward's, inside one dark frame.
    const double wf = std::round(w * c.split * 100) / 100;
    const char* ffill = viz::cell_fill(ActionType::Forward, c.direction);
    const char* bfill = viz::cell_fill(ActionType::Backward, c.bwd_direction);
    svg.rect(x, y, wf, kRowHeight, "class=\"half fwd\" " + fill_attr(ffill));
    svg.rect(x + wf, y, w - wf, kRowHeight, "class=\"half bwd\" " + fill_attr(bfill));
    svg.rect(x, y, w, kRowHeight, "class=\"box\" fill=\"none\"");
    cell_number(svg, x, wf, y, c.action.microbatch, ffill);
    cell_number(svg, x + wf, w - wf, y, c.action.bwd_microbatch, bfill);
  }
  svg.out() += "</g>\n";
}

constexpr double kSpanHeight = 4;

// A span of communication as a strip over the row's edge: track 0 (the thread running the schedule) along the
// top, track 1 (the backward half of an overlapped pair) along the bottom, so an all-to-all drawn over a cell is
// one that computation hid, and one over idle band is exposed; a data-parallel collective along the bottom in its
// own colour. Clipped to the drawn time range.
void draw_span(SvgBuilder& svg, const Scale& s, const TimelineSpan& span, double y, const std::string& time_unit,
               bool tooltips) {
  const double start = std::max(span.start, s.t0), end = std::min(span.end, s.t1);
  if (end < start) return;
  const double x = s.x(start), w = std::max(s.x(end) - x, 0.5);
  const bool data_parallel = span.track == TimelineSpan::kDataParallelTrack;
  const double sy = span.track == 0 ? y : y + kRowHeight - kSpanHeight;
  svg.out() += "<g class=\"span\" data-track=\"" + std::to_string(span.track) + "\" data-start=\"" +
               exact(span.start) + "\" data-end=\"" + exact(span.end) + "\">";
  if (tooltips) {
    const char* where = data_parallel ? "data-parallel link" : span.track == 0 ? "schedule thread" : "backward thread";
    svg.out() += "<title>" + xml_escape(detail::concat(span.name, " (", where, "), ",
                                                       format_time(span.end - span.start, time_unit))) +
                 "</title>";
  }
  svg.rect(x, sy, w, kSpanHeight, std::string("fill=\"") + (data_parallel ? viz::kDataParallelFill : viz::kCommFill) +
                                      "\" fill-opacity=\"0.85\"");
  svg.out() += "</g>\n";
}

// The legend: one entry per action type present (light and dark tone when direction 1 occurs), the pair,
// and idle time. Returns the height used.
double draw_legend(SvgBuilder& svg, const std::vector<Timeline>& timelines, double y, double width) {
  std::set<ActionType> types;
  bool dark = false;
  for (const Timeline& t : timelines)
    for (const TimelineRow& row : t.rows)
      for (const TimelineCell& c : row.cells) {
        types.insert(c.action.type);
        dark = dark || c.direction == 1 || (c.action.type == ActionType::Overlapped && c.bwd_direction == 1);
      }
  struct Entry { ActionType type; const char* label; };
  const Entry entries[] = {{ActionType::Forward, "F forward"},
                           {ActionType::Backward, "B backward (full)"},
                           {ActionType::BackwardInput, "I backward for inputs"},
                           {ActionType::BackwardWeight, "W weight gradients"},
                           {ActionType::Overlapped, "F&B overlapped pair"}};
  double x = kMarginLeft, line_y = y;
  const auto advance = [&](double w) {
    if (x + w > width - kMarginRight && x > kMarginLeft) x = kMarginLeft, line_y += 20;
  };
  const std::string label_attr = "font-size=\"11.5\" fill=\"" + std::string(viz::kTextFill) + "\"";
  for (const Entry& e : entries) {
    if (!types.count(e.type)) continue;
    const double swatches = e.type == ActionType::Overlapped ? 30 : (dark ? 32 : 16);
    const double w = swatches + 8 + 7.0 * std::string(e.label).size() + 18;
    advance(w);
    if (e.type == ActionType::Overlapped) {
      svg.rect(x, line_y, 15, 13, fill_attr(viz::cell_fill(ActionType::Forward, 0)));
      svg.rect(x + 15, line_y, 15, 13, fill_attr(viz::cell_fill(ActionType::Backward, 0)));
      svg.rect(x, line_y, 30, 13,
               std::string("fill=\"none\" stroke=\"") + viz::kPairFrame + "\" stroke-width=\"1.2\"");
    } else {
      svg.rect(x, line_y, 16, 13, fill_attr(viz::cell_fill(e.type, 0)));
      if (dark) svg.rect(x + 16, line_y, 16, 13, fill_attr(viz::cell_fill(e.type, 1)));
    }
    svg.text(x + swatches + 6, line_y + 10.5, e.label, label_attr);
    x += w;
  }
  bool all_to_all = false, data_parallel = false;
  for (const Timeline& t : timelines)
    for (const TimelineRow& row : t.rows)
      for (const TimelineSpan& span : row.spans)
        (span.track == TimelineSpan::kDataParallelTrack ? data_parallel : all_to_all) = true;
  const auto strip_entry = [&](const char* label, const char* fill) {
    const double w = 30 + 8 + 7.0 * std::string(label).size() + 18;
    advance(w);
    svg.rect(x, line_y + 4.5, 30, kSpanHeight, std::string("fill=\"") + fill + "\"");
    svg.text(x + 36, line_y + 10.5, label, label_attr);
    x += w;
  };
  if (all_to_all)
    strip_entry("all-to-all in flight (top edge: schedule thread, bottom edge: backward thread)", viz::kCommFill);
  if (data_parallel)
    strip_entry("data-parallel UNSHARD / REDUCE_GRAD in flight (bottom edge)", viz::kDataParallelFill);
  advance(130);
  svg.rect(x, line_y, 30, 13, std::string("fill=\"") + viz::kIdleFill + "\" stroke=\"#cccccc\" stroke-width=\"0.6\"");
  svg.text(x + 36, line_y + 10.5, "idle", label_attr);
  if (dark) {
    line_y += 20;
    svg.text(kMarginLeft, line_y + 10.5,
             "light / dark tone: direction 0 / 1 (DualPipe, Chimera), or a rank's first / second stage chunk "
             "(V shapes, interleaved); numbers are micro-batches",
             "font-size=\"11\" fill=\"" + std::string(viz::kMutedText) + "\"");
  } else {
    line_y += 20;
    svg.text(kMarginLeft, line_y + 10.5, "numbers are micro-batches; time runs left to right",
             "font-size=\"11\" fill=\"" + std::string(viz::kMutedText) + "\"");
  }
  return line_y + 20 - y;
}

// Grid lines across a panel and the tick labels under it.
void draw_axis(SvgBuilder& svg, const Scale& s, const AxisUnit& unit, double top, double bottom) {
  const double step = tick_step(s, 90);
  const std::string grid = std::string("stroke=\"") + viz::kGridStroke + "\" stroke-width=\"0.7\"";
  svg.line(s.x(s.t0), bottom, s.x(s.t1), bottom, "stroke=\"#888888\" stroke-width=\"0.8\"");
  for (double t = std::ceil(s.t0 / step) * step; t <= s.t1 + step * 1e-9; t += step) {
    svg.line(s.x(t), top, s.x(t), bottom + 4, grid);
    svg.text(s.x(t), bottom + 15, shortest_fixed(t / unit.divisor, 3),
             "font-size=\"10\" text-anchor=\"middle\" fill=\"" + std::string(viz::kMutedText) + "\"");
  }
}

}  // namespace

std::string describe_cell(const TimelineCell& c, const std::string& time_unit) {
  const Action& a = c.action;
  std::string what;
  switch (a.type) {
    case ActionType::Forward: what = "forward"; break;
    case ActionType::Backward: what = "full backward"; break;
    case ActionType::BackwardInput: what = "backward for inputs (weight gradients deferred)"; break;
    case ActionType::BackwardWeight: what = "deferred weight gradients"; break;
    case ActionType::Overlapped:
      what = "overlapped forward " + to_string(a.forward_half()) + " and backward " + to_string(a.backward_half());
      break;
    default: what = std::string(type_name(a.type));
  }
  if (a.type != ActionType::Overlapped)
    what += detail::concat(", stage ", a.stage, ", micro-batch ", a.microbatch);
  return detail::concat(to_string(a), ": ", what, "\nstart ", format_time(c.start, time_unit), "\nend ",
                        format_time(c.end, time_unit), "\nduration ", format_time(c.duration(), time_unit));
}

std::string render_svg(const std::vector<Timeline>& timelines, const SvgOptions& options) {
  DUALPIPE_REQUIRE(!timelines.empty(), "nothing to draw: no timeline given");
  for (const Timeline& t : timelines) {
    DUALPIPE_REQUIRE(t.time_unit == timelines[0].time_unit, "cannot draw timelines in different time units on one "
                     "axis: '", t.time_unit, "' and '", timelines[0].time_unit, "'");
  }
  DUALPIPE_REQUIRE(options.width == 0 || (options.width >= kMinSvgWidth && options.width <= kMaxSvgWidth),
                   "picture width must be ", kMinSvgWidth, " to ", kMaxSvgWidth, " px, got ", options.width);
  std::size_t cells = 0;
  for (const Timeline& t : timelines) {
    cells += t.num_cells();
    for (const TimelineRow& row : t.rows) cells += row.spans.size();
  }
  DUALPIPE_REQUIRE(cells <= kMaxSvgCells, "a picture of ", cells, " actions and spans is above the limit of ",
                   kMaxSvgCells, " per picture (draw fewer ranks or micro-batches)");
  const bool single = timelines.size() == 1;
  const std::string& unit = timelines[0].time_unit;

  Scale s;
  s.t0 = timelines[0].begin();
  s.t1 = timelines[0].end();
  for (const Timeline& t : timelines) s.t0 = std::min(s.t0, t.begin()), s.t1 = std::max(s.t1, t.end());
  // Finite start and end times can still be further apart than the largest double (a trace with ts -1e308
  // and 1e308): the scale would be 0 pixels per unit and every position NaN.
  DUALPIPE_REQUIRE(std::isfinite(s.t1 - s.t0), "cannot draw timelines from ", s.t0, " to ", s.t1,
                   ": the time range is too large");
  if (s.t1 <= s.t0) s.t1 = s.t0 + 1;
  const std::string title = !options.title.empty() ? options.title
                            : single                 ? timelines[0].title
                                                     : detail::concat(timelines.size(), " schedules compared");
  std::vector<std::string> subtitle = options.subtitle;
  if (single) subtitle.insert(subtitle.begin(), timelines[0].summary);
  double chart = options.width - kMarginLeft - kMarginRight;
  if (options.width == 0) {
    // Wide enough for the cells' numbers and for the lines of text (estimated: no font metrics here).
    chart = auto_chart_width(timelines, s.t1 - s.t0);
    double text = text_width(title, 16.5);
    for (const std::string& line : subtitle) text = std::max(text, text_width(line, 12.5));
    for (const Timeline& t : timelines)
      if (!single) text = std::max(text, text_width(t.title + "   " + t.summary, 12.5));
    chart = std::min(std::max(chart, text), 3600.0);
  }
  const double width = std::round(kMarginLeft + chart + kMarginRight);
  s.pixels_per_unit = chart / (s.t1 - s.t0);
  const AxisUnit axis = axis_unit(unit, s.t1 - s.t0);

  SvgBuilder body;
  double y = 10;
  body.text(kMarginLeft, y + 16, title, "font-size=\"16\" font-weight=\"bold\" fill=\"#111111\"");
  y += 26;
  for (const std::string& line : subtitle) {
    body.text(kMarginLeft, y + 12, line, "font-size=\"12.5\" fill=\"" + std::string(viz::kTextFill) + "\"");
    y += 17;
  }
  y += 8 + draw_legend(body, timelines, y + 8, width);

  for (std::size_t p = 0; p < timelines.size(); ++p) {
    const Timeline& t = timelines[p];
    body.out() += "<g class=\"timeline\" data-timeline=\"" + std::to_string(p) + "\" data-title=\"" +
                  xml_escape(t.title) + "\">\n";
    if (!single) {
      body.out() += "<text x=\"" + shortest_fixed(kMarginLeft, 2) + "\" y=\"" + shortest_fixed(y + 14, 2) +
                    "\" font-size=\"12.5\" fill=\"#111111\"><tspan font-weight=\"bold\">" + xml_escape(t.title) +
                    "</tspan><tspan fill=\"" + viz::kTextFill + "\">   " + xml_escape(t.summary) + "</tspan></text>\n";
      y += 20;
    }
    const double top = y;
    draw_axis(body, s, axis, top - 2, top + t.rows.size() * kRowPitch);
    for (std::size_t r = 0; r < t.rows.size(); ++r) {
      const TimelineRow& row = t.rows[r];
      const double ry = top + r * kRowPitch + (kRowPitch - kRowHeight) / 2;
      body.out() += "<g class=\"row\" data-rank=\"" + std::to_string(r) + "\" font-size=\"" + shortest_fixed(kFontSize, 1) +
                    "\" text-anchor=\"middle\">\n";
      body.text(kMarginLeft - 8, ry + kRowHeight / 2 + 4, row.label,
                "font-size=\"11\" text-anchor=\"end\" fill=\"" + std::string(viz::kTextFill) + "\"");
      // The band from the timeline's first start to its last end: what is left empty in it is idle time.
      body.rect(s.x(t.begin()), ry, s.x(t.end()) - s.x(t.begin()), kRowHeight,
                std::string("class=\"band\" fill=\"") + viz::kIdleFill + "\"");
      for (const TimelineCell& c : row.cells) draw_cell(body, s, c, static_cast<int>(p), static_cast<int>(r), ry,
                                                        unit, options.tooltips);
      for (const TimelineSpan& span : row.spans) draw_span(body, s, span, ry, unit, options.tooltips);
      body.out() += "</g>\n";
    }
    body.out() += "</g>\n";
    y = top + t.rows.size() * kRowPitch + 22;
    if (p + 1 == timelines.size()) {
      body.text(width - kMarginRight, y + 6, axis.caption,
                "font-size=\"10.5\" text-anchor=\"end\" fill=\"" + std::string(viz::kMutedText) + "\"");
      y += 10;
    }
    y += 12;
  }
  for (const std::string& note : options.notes) {
    body.text(kMarginLeft, y + 11, note, "font-size=\"11\" fill=\"" + std::string(viz::kMutedText) + "\"");
    y += 16;
  }
  const double height = std::round(y + 8);

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + shortest_fixed(width, 0) + "\" height=\"" +
                    shortest_fixed(height, 0) + "\" viewBox=\"0 0 " + shortest_fixed(width, 0) + " " + shortest_fixed(height, 0) +
                    "\" font-family=\"" + kFontFamily + "\" data-time-unit=\"" + xml_escape(unit) + "\">\n";
  svg += "<title>" + xml_escape(title) + "</title>\n";
  // Shared presentation of the cells, stated once: thousands of cells make per-element attributes add up.
  svg += std::string("<style>\n.cell .box { stroke: #ffffff; stroke-width: 0.6px; }\n"
                     ".cell.pair .box { fill: none; stroke: ") + viz::kPairFrame + "; stroke-width: 1.2px; }\n" +
         "</style>\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + shortest_fixed(width, 0) + "\" height=\"" + shortest_fixed(height, 0) +
         "\" fill=\"#ffffff\"/>\n";
  svg += body.out();
  svg += "</svg>\n";
  return svg;
}

}  // namespace dualpipe
