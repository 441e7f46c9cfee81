// The training-run picture of metrics_plot.h: two panels on one step axis, drawn on a fixed canvas.
#include "dualpipe/viz/metrics_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "dualpipe/util/error.h"
#include "dualpipe/util/number_format.h"
#include "viz/palette.h"
#include "viz/text_util.h"

namespace dualpipe {
namespace {

using namespace viz;  // the pictures' shared helpers: text_util.h, palette.h

constexpr double kPlotMarginLeft = 78;
constexpr double kPlotMarginRight = 30;
constexpr double kLossTop = 112, kLossBottom = 362;        // panel (a)
constexpr double kRateTop = 402, kRateBottom = 530;        // panel (b)
constexpr const char* kLossStroke = "#2f6ca8";
constexpr const char* kValStroke = "#c46a12";
constexpr const char* kRateStroke = "#2b8040";
constexpr const char* kAxisStroke = "#888888";

// A linear map from values to pixels. Pixel positions are rounded to 1/100 px, as in the timelines.
struct Axis {
  double lo = 0, hi = 1;        // values at the two ends
  double p_lo = 0, p_hi = 1;    // their pixels (for a vertical axis p_lo is the bottom)
  double step = 1;              // between ticks
  double at(double v) const { return std::round((p_lo + (v - lo) / (hi - lo) * (p_hi - p_lo)) * 100) / 100; }
};

// A value axis over [lo, hi] widened to whole ticks: equal values get a band around them, and a range
// a double cannot hold is refused rather than drawn as NaN.
Axis value_axis(double lo, double hi, double p_bottom, double p_top, double ticks, const char* what) {
  if (hi == lo) {
    const double pad = std::max(std::abs(lo) * 0.1, 1.0);
    lo = lo == 0 ? 0 : lo - pad, hi += pad;
  } else {
    const double min_span = std::max(1e-6, 1e-9 * std::max(std::abs(lo), std::abs(hi)));
    if (hi - lo < min_span) lo -= min_span / 2, hi += min_span / 2;
  }
  Axis a;
  a.p_lo = p_bottom, a.p_hi = p_top;
  if (std::isfinite(hi - lo)) {
    a.step = viz::round_step((hi - lo) / ticks);
    a.lo = std::floor(lo / a.step) * a.step;
    a.hi = std::ceil(hi / a.step) * a.step;
  }
  DUALPIPE_REQUIRE(std::isfinite(hi - lo) && std::isfinite(a.hi - a.lo), "cannot draw ", what, " from ", lo, " to ",
                   hi, ": the range is too large");
  return a;
}

// A tick label of the axis with as many decimals as its tick step needs; an axis reaching 10000 in steps of
// at least 1000 is labelled in thousands ("5k", "10k"), one beyond ten million in exponents.
std::string tick_label(double v, const Axis& axis) {
  const double largest = std::max(std::abs(axis.lo), std::abs(axis.hi));
  if (std::abs(v) < axis.step * 1e-6) v = 0;
  if (largest >= 1e7 || axis.step < 1e-4) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
  }
  const auto decimals = [](double s) { return std::clamp(static_cast<int>(std::ceil(-std::log10(s) - 1e-9)), 0, 4); };
  if (largest >= 1e4 && axis.step >= 1000) return shortest_fixed(v / 1000, decimals(axis.step / 1000)) + (v == 0 ? "" : "k");
  return shortest_fixed(v, decimals(axis.step));
}

// Cut to the characters that fit in `pixels` at `font_size` (a generous estimate: no font metrics here).
std::string fit(const std::string& text, double pixels, double font_size) {
  const auto chars = static_cast<std::size_t>(std::max(pixels / (font_size * 0.6), 4.0));
  return text.size() <= chars ? text : text.substr(0, chars - 3) + "...";
}

std::string text(double x, double y, const std::string& content, const std::string& attributes) {
  return "<text x=\"" + shortest_fixed(x, 2) + "\" y=\"" + shortest_fixed(y, 2) + "\" " + attributes + ">" + xml_escape(content) +
         "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attributes) {
  return "<line x1=\"" + shortest_fixed(x1, 2) + "\" y1=\"" + shortest_fixed(y1, 2) + "\" x2=\"" + shortest_fixed(x2, 2) + "\" y2=\"" +
         shortest_fixed(y2, 2) + "\" " + attributes + "/>\n";
}

std::string muted(double size, const char* anchor = "start") {
  return "font-size=\"" + shortest_fixed(size, 1) + "\" text-anchor=\"" + anchor + "\" fill=\"" + viz::kMutedText + "\"";
}

struct Point {
  int step;
  double value;
};

// The points a polyline needs: all of them, or with more than two per pixel column the first, lowest, highest
// and last of each column (in step order), which draws the same shape.
std::vector<Point> thinned(const std::vector<Point>& points, const Axis& x) {
  const double columns = std::abs(x.p_hi - x.p_lo);
  if (points.size() <= 2 * columns) return points;
  std::vector<Point> out;
  std::size_t begin = 0;
  while (begin < points.size()) {
    const auto column = static_cast<long>(std::floor(x.at(points[begin].step)));
    std::size_t end = begin, low = begin, high = begin;
    while (end < points.size() && static_cast<long>(std::floor(x.at(points[end].step))) == column) {
      if (points[end].value < points[low].value) low = end;
      if (points[end].value > points[high].value) high = end;
      ++end;
    }
    std::size_t keep[] = {begin, std::min(low, high), std::max(low, high), end - 1};
    for (std::size_t i = 0; i < 4; ++i)
      if (i == 0 || keep[i] != keep[i - 1]) out.push_back(points[keep[i]]);
    begin = end;
  }
  return out;
}

std::string polyline(const std::vector<Point>& points, const Axis& x, const Axis& y, const char* series,
                     const char* stroke) {
  const std::vector<Point> drawn = thinned(points, x);
  std::string p;
  p.reserve(drawn.size() * 14);
  for (const Point& pt : drawn) {
    if (!p.empty()) p += ' ';
    p += shortest_fixed(x.at(pt.step), 2) + "," + shortest_fixed(y.at(pt.value), 2);
  }
  return std::string("<polyline class=\"series ") + series + "\" data-series=\"" + series + "\" data-steps=\"" +
         std::to_string(points.size()) + "\" points=\"" + p + "\" fill=\"none\" stroke=\"" + stroke +
         "\" stroke-width=\"1.6\" stroke-linejoin=\"round\"/>\n";
}

// Grid lines and tick labels of a value axis, the caption along it.
std::string value_grid(const Axis& y, double x0, double x1, const std::string& caption) {
  std::string out = "<g class=\"y-axis\">\n";
  const std::string grid = std::string("stroke=\"") + viz::kGridStroke + "\" stroke-width=\"0.7\"";
  const long ticks = std::lround((y.hi - y.lo) / y.step);
  for (long i = 0; i <= ticks; ++i) {
    const double v = y.lo + i * y.step;
    out += line(x0 - 4, y.at(v), x1, y.at(v), grid);
    out += text(x0 - 7, y.at(v) + 3.5, tick_label(v, y), "class=\"tick\" " + muted(10, "end"));
  }
  out += line(x0, y.p_lo, x0, y.p_hi, std::string("stroke=\"") + kAxisStroke + "\" stroke-width=\"0.8\"");
  const double mid = (y.p_lo + y.p_hi) / 2;
  out += "<text class=\"axis-title\" x=\"18\" y=\"" + shortest_fixed(mid, 2) + "\" transform=\"rotate(-90 18 " + shortest_fixed(mid, 2) +
         ")\" font-size=\"11.5\" text-anchor=\"middle\" fill=\"" + viz::kTextFill + "\">" + xml_escape(caption) +
         "</text>\n";
  return out + "</g>\n";
}

// The step axis: vertical grid lines through both panels, tick labels under the lower one.
std::string step_grid(const Axis& x) {
  std::string out = "<g class=\"x-axis\">\n";
  const std::string grid = std::string("stroke=\"") + viz::kGridStroke + "\" stroke-width=\"0.7\"";
  const std::string axis = std::string("stroke=\"") + kAxisStroke + "\" stroke-width=\"0.8\"";
  for (double t = std::ceil(x.lo / x.step) * x.step; t <= x.hi; t += x.step) {
    out += line(x.at(t), kLossTop, x.at(t), kLossBottom, grid);
    out += line(x.at(t), kRateTop, x.at(t), kRateBottom + 4, grid);
    out += text(x.at(t), kRateBottom + 16, tick_label(t, x), "class=\"tick\" " + muted(10, "middle"));
  }
  out += line(x.p_lo, kLossBottom, x.p_hi, kLossBottom, axis);
  out += line(x.p_lo, kRateBottom, x.p_hi, kRateBottom, axis);
  out += text((x.p_lo + x.p_hi) / 2, kRateBottom + 34, "step",
              std::string("class=\"axis-title\" font-size=\"11.5\" text-anchor=\"middle\" fill=\"") + viz::kTextFill +
                  "\"");
  return out + "</g>\n";
}

// One legend entry: a short stroke (dashed, with a marker) and its label. Returns the width used.
double legend_entry(std::string& out, double x, double y, const char* stroke, const std::string& label,
                    bool dashed = false, bool marker = false) {
  out += line(x, y, x + 26, y, std::string("stroke=\"") + stroke + "\" stroke-width=\"" + (dashed ? "1.4" : "1.8") +
                                   "\"" + (dashed ? " stroke-dasharray=\"6 4\"" : ""));
  if (marker)
    out += "<circle cx=\"" + shortest_fixed(x + 13, 2) + "\" cy=\"" + shortest_fixed(y, 2) + "\" r=\"3\" fill=\"" + stroke + "\"/>\n";
  out += text(x + 32, y + 4, label, std::string("font-size=\"11.5\" fill=\"") + viz::kTextFill + "\"");
  return 32 + label.size() * 11.5 * 0.6 + 22;
}

// "dualpipe, 4 ranks, 8 micro-batches, ..." from the config fields a training run writes, those present.
std::string run_description(const MetricsLog& log) {
  struct Field {
    const char *key, *before, *after;
  };
  const Field fields[] = {{"schedule", "", ""},       {"ranks", "", " ranks"},   {"microbatches", "", " micro-batches"},
                          {"batch", "batch ", ""},    {"seq_len", "sequence ", ""}, {"layers", "", " layers"},
                          {"hidden", "hidden ", ""},  {"heads", "", " heads"},   {"parameters", "", " parameters"}};
  std::string out;
  for (const Field& f : fields) {
    const std::string value = log.config_value(f.key);
    if (!value.empty()) out += (out.empty() ? "" : ", ") + (f.before + value) + f.after;
  }
  return out.empty() ? "no run configuration in the file" : out;
}

double median_tokens_per_s(const MetricsLog& log) {
  std::vector<double> v;
  for (const MetricsStep& s : log.steps) v.push_back(s.tokens_per_s);
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

std::string summary(const MetricsLog& log) {
  std::string out = detail::concat(log.steps.size(), " steps, final loss ", shortest_fixed(log.steps.back().loss, 4));
  if (!log.evals.empty())
    out += detail::concat("; validation loss ", shortest_fixed(log.evals.back().val_loss, 4), " at step ",
                          log.evals.back().step);
  if (log.unigram_baseline) out += "; baseline " + shortest_fixed(*log.unigram_baseline, 4);
  return out + "; median " + shortest_fixed(median_tokens_per_s(log), 0) + " tokens/s";
}

}  // namespace

std::string render_metrics_svg(const MetricsLog& log, const MetricsPlotOptions& options) {
  DUALPIPE_REQUIRE(options.width >= kMinMetricsPlotWidth && options.width <= kMaxMetricsPlotWidth,
                   "plot width must be from ", kMinMetricsPlotWidth, " to ", kMaxMetricsPlotWidth, " pixels, got ",
                   options.width);
  DUALPIPE_REQUIRE(!log.steps.empty(), "metrics '", log.source, "': no step records: nothing to plot");
  const double width = options.width, height = kMetricsPlotHeight;
  const double x0 = kPlotMarginLeft, x1 = width - kPlotMarginRight;

  std::vector<Point> loss, val, rate;
  double loss_lo = log.steps[0].loss, loss_hi = loss_lo, rate_hi = 0;
  for (const MetricsStep& s : log.steps) {
    loss.push_back({s.step, s.loss});
    rate.push_back({s.step, s.tokens_per_s});
    loss_lo = std::min(loss_lo, s.loss), loss_hi = std::max(loss_hi, s.loss);
    rate_hi = std::max(rate_hi, s.tokens_per_s);
  }
  for (const MetricsEval& e : log.evals) {
    val.push_back({e.step, e.val_loss});
    loss_lo = std::min(loss_lo, e.val_loss), loss_hi = std::max(loss_hi, e.val_loss);
  }
  if (log.unigram_baseline)
    loss_lo = std::min(loss_lo, *log.unigram_baseline), loss_hi = std::max(loss_hi, *log.unigram_baseline);

  // The step axis spans the records exactly (an evaluation at step 0 included); one step gets a unit around it.
  Axis x;
  x.lo = log.steps.front().step, x.hi = log.steps.back().step;
  if (!log.evals.empty())
    x.lo = std::min<double>(x.lo, log.evals.front().step), x.hi = std::max<double>(x.hi, log.evals.back().step);
  if (x.hi == x.lo) x.lo = std::max(0.0, x.lo - 1), x.hi = x.lo + 2;
  x.p_lo = x0, x.p_hi = x1;
  x.step = std::max(1.0, viz::round_step((x.hi - x.lo) / ((x1 - x0) / 90)));
  const Axis y_loss = value_axis(loss_lo, loss_hi, kLossBottom, kLossTop, 6, "the losses");
  const Axis y_rate = value_axis(0, rate_hi, kRateBottom, kRateTop, 3, "tokens/s");

  std::string body;
  const std::string title = options.title.empty() ? "training run: " + log.source : options.title;
  body += text(x0, 28, fit(title, x1 - x0, 16),
               "class=\"title\" font-size=\"16\" font-weight=\"bold\" fill=\"#111111\"");
  body += text(x0, 48, fit(run_description(log), x1 - x0, 12.5),
               std::string("class=\"subtitle\" font-size=\"12.5\" fill=\"") + viz::kTextFill + "\"");
  body += text(x0, 66, fit(summary(log), x1 - x0, 12.5),
               std::string("class=\"subtitle\" font-size=\"12.5\" fill=\"") + viz::kTextFill + "\"");

  body += "<g class=\"legend\">\n";
  double lx = x0;
  lx += legend_entry(body, lx, 86, kLossStroke, "training loss");
  if (!val.empty()) lx += legend_entry(body, lx, 86, kValStroke, "validation loss", false, true);
  // Panel (b) has one series, named by its caption.
  if (log.unigram_baseline) legend_entry(body, lx, 86, viz::kMutedText, "unigram baseline", true);
  body += "</g>\n";

  body += step_grid(x);

  body += "<g class=\"panel\" data-panel=\"loss\">\n";
  body += value_grid(y_loss, x0, x1, "loss");
  if (log.unigram_baseline) {
    const double b = *log.unigram_baseline, yb = y_loss.at(b);
    body += line(x0, yb, x1, yb, std::string("class=\"baseline\" data-value=\"") + exact(b) + "\" stroke=\"" +
                                     viz::kMutedText + "\" stroke-width=\"1.4\" stroke-dasharray=\"6 4\"");
    // Above the line, or under it when the line runs along the top of the panel.
    const double label_y = yb - 14 < kLossTop ? yb + 13 : yb - 5;
    body += text(x1 - 4, label_y, "unigram baseline " + shortest_fixed(b, 3), "class=\"baseline-label\" " + muted(11, "end"));
  }
  body += polyline(loss, x, y_loss, "loss", kLossStroke);
  if (!val.empty()) {
    body += polyline(val, x, y_loss, "val_loss", kValStroke);
    // A marker per evaluation while they stay apart; more would be one smudge (the line still shows them).
    if (val.size() <= (x1 - x0) / 6) {
      for (const Point& p : val)
        body += "<circle class=\"marker\" data-step=\"" + std::to_string(p.step) + "\" data-value=\"" +
                exact(p.value) + "\" cx=\"" + shortest_fixed(x.at(p.step), 2) + "\" cy=\"" + shortest_fixed(y_loss.at(p.value), 2) +
                "\" r=\"3\" fill=\"" + kValStroke + "\"/>\n";
    }
  }
  if (loss.size() == 1)  // a polyline of one point draws nothing
    body += "<circle class=\"marker\" cx=\"" + shortest_fixed(x.at(loss[0].step), 2) + "\" cy=\"" +
            shortest_fixed(y_loss.at(loss[0].value), 2) + "\" r=\"2.5\" fill=\"" + kLossStroke + "\"/>\n";
  body += "</g>\n";

  body += "<g class=\"panel\" data-panel=\"tokens_per_s\">\n";
  body += text(x0, kRateTop - 8, "tokens per second",
               std::string("font-size=\"11.5\" fill=\"") + viz::kTextFill + "\"");
  body += value_grid(y_rate, x0, x1, "tokens/s");
  body += polyline(rate, x, y_rate, "tokens_per_s", kRateStroke);
  body += "</g>\n";

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + shortest_fixed(width, 0) + "\" height=\"" +
                    shortest_fixed(height, 0) + "\" viewBox=\"0 0 " + shortest_fixed(width, 0) + " " + shortest_fixed(height, 0) +
                    "\" font-family=\"" + kFontFamily + "\" data-steps=\"" + std::to_string(log.steps.size()) +
                    "\" data-evals=\"" + std::to_string(log.evals.size()) + "\">\n";
  svg += "<title>" + xml_escape(title) + "</title>\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + shortest_fixed(width, 0) + "\" height=\"" + shortest_fixed(height, 0) +
         "\" fill=\"#ffffff\"/>\n";
  svg += body;
  svg += "</svg>\n";
  return svg;
}

}  // namespace dualpipe
