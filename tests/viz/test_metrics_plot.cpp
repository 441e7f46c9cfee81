// The metrics file of a training run read back (values as written by hand, every error with its line) and its
// picture read as XML: one point per step, positions linear in step and value (checked against the hand-written
// values, not the renderer's scale), the baseline where its value says, labels, legend, bounded size.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "dualpipe/trace/metrics_log.h"
#include "dualpipe/viz/metrics_plot.h"
#include "test_helpers.h"
#include "viz/xml_reader.h"

namespace dualpipe::test {
// Named, not anonymous: in a unity build (cmake/unity_build.cmake) test_trace.cpp has its own expect_error.
namespace metrics_plot_tests {

// A run of 12 steps with evaluations before the first step, after step 6 and after step 12, a record type and
// fields the reader does not know, a blank line and a Windows line end.
const char* const kGoodRun =
    R"({"type":"config","schedule":"dualpipe","ranks":4,"lr":0.001,"recompute":false,"stage_cut":[1,2],"unigram_baseline":3.91}
{"type":"eval","step":0,"val_loss":5.5}
{"type":"step","step":1,"loss":5.25,"tokens_per_s":1000,"step_ms":210.5,"lr":0.001,"grad_norm":1.5,"peak_activation_bytes":[1,2,3,4],"new_field":{"x":1}}
{"type":"step","step":2,"loss":4.75,"tokens_per_s":2000,"step_ms":200,"lr":0.001,"grad_norm":1.25,"peak_activation_bytes":[4,3,2,1]}
{"type":"future_record","step":"not checked"}
{"type":"step","step":3,"loss":4.5,"tokens_per_s":2100}
{"type":"step","step":4,"loss":4.25,"tokens_per_s":2200}

{"type":"step","step":5,"loss":4.0,"tokens_per_s":2150}
{"type":"step","step":6,"loss":3.75,"tokens_per_s":2300}
{"type":"eval","step":6,"val_loss":4.0}
{"type":"step","step":7,"loss":3.5,"tokens_per_s":2250}
{"type":"step","step":8,"loss":3.25,"tokens_per_s":2400}   
{"type":"step","step":9,"loss":3.0,"tokens_per_s":2350}
{"type":"step","step":10,"loss":2.875,"tokens_per_s":2450}
{"type":"step","step":11,"loss":2.75,"tokens_per_s":2500}
{"type":"step","step":12,"loss":2.5,"tokens_per_s":2400}
{"type":"eval","step":12,"val_loss":3.0}
)";

TEST(MetricsLog, ReadsWhatWasWritten) {
  const MetricsLog log = parse_metrics_log(kGoodRun, "run.jsonl");
  EXPECT_EQ(log.source, "run.jsonl");
  ASSERT_TRUE(log.unigram_baseline.has_value());
  EXPECT_EQ(*log.unigram_baseline, 3.91);
  EXPECT_EQ(log.config_value("schedule"), "dualpipe");
  EXPECT_EQ(log.config_value("ranks"), "4");
  EXPECT_EQ(log.config_value("lr"), "0.001");
  EXPECT_EQ(log.config_value("recompute"), "false");
  EXPECT_EQ(log.config_value("stage_cut"), "") << "containers are not kept";
  EXPECT_EQ(log.config_value("type"), "");

  ASSERT_EQ(log.steps.size(), 12u);
  const double losses[] = {5.25, 4.75, 4.5, 4.25, 4.0, 3.75, 3.5, 3.25, 3.0, 2.875, 2.75, 2.5};
  const double rates[] = {1000, 2000, 2100, 2200, 2150, 2300, 2250, 2400, 2350, 2450, 2500, 2400};
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(log.steps[i].step, i + 1);
    EXPECT_EQ(log.steps[i].loss, losses[i]);
    EXPECT_EQ(log.steps[i].tokens_per_s, rates[i]);
  }
  EXPECT_EQ(log.steps[0].step_ms, 210.5);
  EXPECT_EQ(log.steps[0].lr, 0.001);
  EXPECT_EQ(log.steps[1].grad_norm, 1.25);
  EXPECT_EQ(log.steps[0].peak_activation_bytes, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_FALSE(log.steps[2].step_ms.has_value()) << "optional fields stay absent";
  EXPECT_TRUE(log.steps[2].peak_activation_bytes.empty());

  ASSERT_EQ(log.evals.size(), 3u);
  EXPECT_EQ(log.evals[0].step, 0);
  EXPECT_EQ(log.evals[0].val_loss, 5.5);
  EXPECT_EQ(log.evals[1].step, 6);
  EXPECT_EQ(log.evals[2].val_loss, 3.0);
}

TEST(MetricsLog, ConfigAndBaselineAreOptional) {
  const MetricsLog log = parse_metrics_log(R"({"type":"step","step":7,"loss":1e-3,"tokens_per_s":0})", "x");
  EXPECT_FALSE(log.unigram_baseline.has_value());
  EXPECT_TRUE(log.config.empty());
  ASSERT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(log.steps[0].step, 7);
  EXPECT_EQ(log.steps[0].loss, 0.001);
  EXPECT_TRUE(log.evals.empty());
}

// The error for `text`, which must name the file and hold `expected` (with the line number).
void expect_error(const std::string& text, const std::string& expected) {
  const std::string message = error_message([&] { parse_metrics_log(text, "bad.jsonl"); });
  EXPECT_TRUE(contains(message, "metrics 'bad.jsonl'")) << message;
  EXPECT_TRUE(contains(message, expected)) << "expected '" << expected << "' in: " << message;
}

const std::string kConfig = R"({"type":"config","unigram_baseline":3.91})" "\n";
const std::string kStep1 = R"({"type":"step","step":1,"loss":4.1,"tokens_per_s":1234.5})" "\n";

TEST(MetricsLog, ErrorsNameTheLineAndTheProblem) {
  // The third line has 24 characters: the input ends at column 25.
  expect_error(kConfig + kStep1 + "{\"type\":\"step\",\"step\":2,\n",
               "line 3: not valid JSON (column 25: syntax error while parsing object key - unexpected end of input");
  expect_error(kConfig + kStep1 + R"({"type":"step","step":2,"lo)",
               "line 3: not valid JSON (column 28: syntax error while parsing object key - invalid string: missing "
               "closing quote; last read: '\"lo'; expected string literal); it is the last line and has no newline: "
               "was the file still being written?");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":1e999,"tokens_per_s":1})" "\n",
               "line 2: not valid JSON (number overflow parsing '1e999')");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":NaN,"tokens_per_s":1})" "\n", "line 2: not valid JSON");
  expect_error(kConfig + R"({"type":"step","step":1,"tokens_per_s":1})" "\n", "line 2: missing field 'loss'");
  expect_error(kConfig + R"({"type":"step","loss":1,"tokens_per_s":1})" "\n", "line 2: missing field 'step'");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":1})" "\n", "line 2: missing field 'tokens_per_s'");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":"4.1","tokens_per_s":1})" "\n",
               "line 2: field 'loss': expected a number, got \"4.1\"");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":null,"tokens_per_s":1})" "\n",
               "line 2: field 'loss': expected a number, got null");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":1,"tokens_per_s":-5})" "\n",
               "line 2: field 'tokens_per_s': expected a number >= 0, got -5");
  expect_error(kConfig + R"({"type":"step","step":1.5,"loss":1,"tokens_per_s":1})" "\n",
               "line 2: field 'step': expected an integer, got 1.5");
  expect_error(kConfig + R"({"type":"step","step":-1,"loss":1,"tokens_per_s":1})" "\n",
               "line 2: field 'step': expected an integer from 0 to 1000000000, got -1");
  expect_error(kConfig + R"({"type":"step","step":18446744073709551615,"loss":1,"tokens_per_s":1})" "\n",
               "line 2: field 'step': expected an integer from 0 to 1000000000");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":1,"tokens_per_s":1,"step_ms":true})" "\n",
               "line 2: field 'step_ms': expected a number, got true");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":1,"tokens_per_s":1,"peak_activation_bytes":7})" "\n",
               "line 2: field 'peak_activation_bytes': expected an array of byte counts, got 7");
  expect_error(kConfig + R"({"type":"step","step":1,"loss":1,"tokens_per_s":1,"peak_activation_bytes":[1,-2]})" "\n",
               "line 2: field 'peak_activation_bytes': expected a number >= 0, got -2");
  expect_error(kConfig + kStep1 + kStep1, "line 3: step 1 comes after step 1 (line 2): step records must have "
                                          "increasing steps");
  expect_error(kConfig + kStep1 + "\n" + R"({"type":"step","step":0,"loss":1,"tokens_per_s":1})",
               "line 4: step 0 comes after step 1 (line 2)");
  expect_error(kConfig + R"({"type":"eval","step":5,"val_loss":1})" "\n" + kStep1 +
                   R"({"type":"eval","step":5,"val_loss":1})" "\n",
               "line 4: evaluation at step 5 comes after the one at step 5 (line 2)");
  expect_error(kConfig + R"({"type":"eval","step":0})" "\n", "line 2: missing field 'val_loss'");
  expect_error(R"({"type":"config","unigram_baseline":"3.9"})" "\n" + kStep1,
               "line 1: field 'unigram_baseline': expected a number, got \"3.9\"");
  expect_error(kConfig + "[1, 2]\n",
               "line 2: expected a JSON object (one record per line), got an array of 2 elements");
  expect_error(kConfig + "42\n", "line 2: expected a JSON object (one record per line), got 42");
  expect_error(kConfig + R"({"step":1})" "\n", "line 2: missing field 'type'");
  expect_error(kConfig + R"({"type":3})" "\n", "line 2: field 'type': expected a string, got 3");
  expect_error(kConfig + kConfig + kStep1, "line 2: a second config record");
  expect_error(kStep1 + kConfig, "line 2: the config record must come before the step and eval records");
  expect_error(kConfig + R"({"type":"eval","step":0,"val_loss":5})" "\n\n",
               "no step records in 3 lines: nothing to plot");
  expect_error("", "no step records in 0 lines");
}

TEST(MetricsLog, LongLinesAreRefusedBeforeParsing) {
  const std::string padding(kMaxMetricsLineBytes, ' ');
  expect_error(kConfig + R"({"type":"step","step":1,"loss":1,"tokens_per_s":1})" + padding + "\n",
               detail::concat("line 2: the line has ", kMaxMetricsLineBytes + 50, " bytes, over the limit of 1048576 "
                              "bytes (1 MiB)"));
  // Exactly at the limit is fine.
  const std::string record = R"({"type":"step","step":1,"loss":1,"tokens_per_s":1})";
  EXPECT_NO_THROW(parse_metrics_log(record + std::string(kMaxMetricsLineBytes - record.size(), ' '), "x"));
}

// A container where a number belongs is described, not printed, and deep nesting does not crash the parser.
TEST(MetricsLog, DeeplyNestedValuesAreDescribed) {
  const std::size_t depth = 400000;  // 800000 bytes: under the line limit
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  expect_error(kConfig + R"({"type":"step","step":1,"tokens_per_s":1,"loss":)" + nested + "}\n",
               "line 2: field 'loss': expected a number, got an array of 1 elements");
  expect_error(nested + "\n", "line 1: expected a JSON object (one record per line), got an array of 1 elements");
  const std::string objects = [&] {
    std::string s;
    for (std::size_t i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  expect_error(kConfig + R"({"type":"step","step":1,"tokens_per_s":1,"loss":)" + objects + "}\n",
               "line 2: field 'loss': expected a number, got an object with 1 fields");
}

class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    std::string pattern = ::testing::TempDir() + "metrics_XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    EXPECT_GE(fd, 0);
    ::close(fd);
    path_ = pattern;
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(MetricsLog, ReadsAFileAndNamesItInErrors) {
  const TempFile good(kGoodRun);
  const MetricsLog log = read_metrics_log(good.path());
  EXPECT_EQ(log.source, good.path());
  EXPECT_EQ(log.steps.size(), 12u);
  EXPECT_EQ(log.evals.size(), 3u);

  const TempFile bad(kConfig + kStep1 + "oops\n");
  const std::string message = error_message([&] { read_metrics_log(bad.path()); });
  EXPECT_TRUE(contains(message, "metrics '" + bad.path() + "' line 3: not valid JSON")) << message;

  EXPECT_TRUE(contains(error_message([] { read_metrics_log("/nonexistent/run.jsonl"); }),
                       "metrics '/nonexistent/run.jsonl' does not exist"));
  EXPECT_TRUE(contains(error_message([] { read_metrics_log("/"); }), "metrics '/' is a directory"));
}

TEST(MetricsLog, FilesOverTheLimitAreRefusedBeforeReading) {
  const TempFile big("");
  // A sparse file: no disk space and no reading, the size alone is refused.
  ASSERT_EQ(::truncate(big.path().c_str(), static_cast<off_t>(kMaxMetricsFileBytes + 1)), 0);
  const std::string message = error_message([&] { read_metrics_log(big.path()); });
  EXPECT_TRUE(contains(message, "metrics '" + big.path() + "' is larger than the limit of 268435456 bytes (256 MiB)"))
      << message;
}

// ---- the picture ----

struct Pt {
  double x, y;
};

std::vector<Pt> points_of(const XmlElement& polyline) {
  std::vector<Pt> out;
  std::istringstream in(polyline.attr("points"));
  std::string pair;
  while (in >> pair) {
    const std::size_t comma = pair.find(',');
    out.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
  }
  return out;
}

const XmlElement* series(const XmlElement& root, const std::string& name) {
  std::vector<const XmlElement*> found;
  root.collect([&](const XmlElement& e) { return e.name == "polyline" && e.has("data-series") &&
                                                 e.attr("data-series") == name; },
               found);
  return found.size() == 1 ? found[0] : nullptr;
}

std::vector<const XmlElement*> with_class(const XmlElement& root, const std::string& name, const std::string& cls) {
  std::vector<const XmlElement*> found;
  root.collect([&](const XmlElement& e) { return e.name == name && e.has_class(cls); }, found);
  return found;
}

// value = a + b * pixel, fitted through two points and checked on all others: the axis is linear.
struct Linear {
  double a, b;
  double pixel(double value) const { return (value - a) / b; }
};

TEST(MetricsPlot, OnePointPerStepOnLinearAxes) {
  const MetricsLog log = parse_metrics_log(kGoodRun, "run.jsonl");
  const std::string svg = render_metrics_svg(log);
  std::unique_ptr<XmlElement> root;
  ASSERT_NO_THROW(root = XmlReader::parse(svg)) << svg.substr(0, 400);
  EXPECT_EQ(root->name, "svg");
  EXPECT_EQ(root->attr("width"), "900");
  EXPECT_EQ(root->attr("height"), "600");
  EXPECT_FALSE(contains(svg, "nan")) << "no NaN coordinates";

  const double steps[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const double losses[] = {5.25, 4.75, 4.5, 4.25, 4.0, 3.75, 3.5, 3.25, 3.0, 2.875, 2.75, 2.5};
  const double rates[] = {1000, 2000, 2100, 2200, 2150, 2300, 2250, 2400, 2350, 2450, 2500, 2400};

  const XmlElement* loss = series(*root, "loss");
  const XmlElement* rate = series(*root, "tokens_per_s");
  const XmlElement* val = series(*root, "val_loss");
  ASSERT_TRUE(loss && rate && val);
  const std::vector<Pt> lp = points_of(*loss), rp = points_of(*rate), vp = points_of(*val);
  ASSERT_EQ(lp.size(), 12u) << "one point per step";
  ASSERT_EQ(rp.size(), 12u);
  ASSERT_EQ(vp.size(), 3u) << "one point per evaluation";
  EXPECT_EQ(loss->attr("data-steps"), "12");

  // Steps map linearly to x, the same for both panels; higher values are higher up (smaller y).
  const Linear step_of_x{steps[0] - lp[0].x * (steps[11] - steps[0]) / (lp[11].x - lp[0].x),
                         (steps[11] - steps[0]) / (lp[11].x - lp[0].x)};
  const Linear loss_of_y{losses[0] - lp[0].y * (losses[11] - losses[0]) / (lp[11].y - lp[0].y),
                         (losses[11] - losses[0]) / (lp[11].y - lp[0].y)};
  const Linear rate_of_y{rates[0] - rp[0].y * (rates[10] - rates[0]) / (rp[10].y - rp[0].y),
                         (rates[10] - rates[0]) / (rp[10].y - rp[0].y)};
  EXPECT_LT(loss_of_y.b, 0);
  EXPECT_LT(rate_of_y.b, 0);
  for (int i = 0; i < 12; ++i) {
    EXPECT_NEAR(lp[i].x, step_of_x.pixel(steps[i]), 0.02) << "step " << steps[i];
    EXPECT_NEAR(rp[i].x, step_of_x.pixel(steps[i]), 0.02) << "step " << steps[i];
    EXPECT_NEAR(lp[i].y, loss_of_y.pixel(losses[i]), 0.02) << "step " << steps[i];
    EXPECT_NEAR(rp[i].y, rate_of_y.pixel(rates[i]), 0.02) << "step " << steps[i];
  }
  // The panels do not overlap: the whole loss panel is above the throughput panel.
  EXPECT_LT(loss_of_y.pixel(5.25), rate_of_y.pixel(2500));
  EXPECT_LT(loss_of_y.pixel(2.5), rate_of_y.pixel(2500));

  // Validation: on the loss scale, with a marker per evaluation at its step and value.
  const double val_steps[] = {0, 6, 12}, val_losses[] = {5.5, 4.0, 3.0};
  const auto markers = with_class(*root, "circle", "marker");
  ASSERT_EQ(markers.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(vp[i].x, step_of_x.pixel(val_steps[i]), 0.02);
    EXPECT_NEAR(vp[i].y, loss_of_y.pixel(val_losses[i]), 0.02);
    EXPECT_EQ(markers[i]->number("data-step"), val_steps[i]);
    EXPECT_EQ(markers[i]->number("data-value"), val_losses[i]);
    EXPECT_NEAR(markers[i]->number("cx"), vp[i].x, 0.02);
    EXPECT_NEAR(markers[i]->number("cy"), vp[i].y, 0.02);
  }

  // The baseline: dashed, horizontal across the panel at 3.91 on the loss scale, labelled.
  const auto baseline = with_class(*root, "line", "baseline");
  ASSERT_EQ(baseline.size(), 1u);
  EXPECT_EQ(baseline[0]->number("data-value"), 3.91);
  EXPECT_TRUE(baseline[0]->has("stroke-dasharray"));
  EXPECT_EQ(baseline[0]->number("y1"), baseline[0]->number("y2"));
  EXPECT_NEAR(baseline[0]->number("y1"), loss_of_y.pixel(3.91), 0.02);
  EXPECT_LE(baseline[0]->number("x1"), step_of_x.pixel(0) + 0.02);
  EXPECT_GE(baseline[0]->number("x2"), step_of_x.pixel(12) - 0.02);
  const auto label = with_class(*root, "text", "baseline-label");
  ASSERT_EQ(label.size(), 1u);
  EXPECT_EQ(label[0]->text, "unigram baseline 3.91");

  // Tick labels sit where their numbers are on the axes measured above.
  int x_ticks = 0, loss_ticks = 0;
  for (const auto* axis : with_class(*root, "g", "x-axis"))
    for (const auto& t : axis->children)
      if (t->name == "text" && t->has_class("tick")) {
        EXPECT_NEAR(t->number("x"), step_of_x.pixel(std::stod(t->text)), 0.02) << t->text;
        ++x_ticks;
      }
  for (const auto* panel : with_class(*root, "g", "panel")) {
    if (panel->attr("data-panel") != "loss") continue;
    for (const auto* t : with_class(*panel, "text", "tick")) {
      EXPECT_NEAR(t->number("y") - 3.5, loss_of_y.pixel(std::stod(t->text)), 0.02) << t->text;
      ++loss_ticks;
    }
  }
  EXPECT_GE(x_ticks, 3);
  EXPECT_GE(loss_ticks, 3);

  // Titles, legend and axis captions.
  const std::string text = root->all_text();
  for (const char* words : {"training run: run.jsonl", "dualpipe, 4 ranks", "12 steps, final loss 2.5",
                            "validation loss 3 at step 12", "baseline 3.91", "median 2300 tokens/s", "training loss",
                            "validation loss", "unigram baseline", "tokens per second", "tokens/s", "loss", "step"}) {
    EXPECT_TRUE(contains(text, words)) << words;
  }
  EXPECT_EQ(with_class(*root, "g", "legend").size(), 1u);
  EXPECT_FALSE(contains(svg, "<script")) << "self-contained";
  EXPECT_FALSE(contains(svg, "href")) << "self-contained";
}

TEST(MetricsPlot, WithoutBaselineOrEvaluations) {
  const MetricsLog log = parse_metrics_log(kStep1 + R"({"type":"step","step":2,"loss":3.5,"tokens_per_s":10})", "r");
  const auto root = XmlReader::parse(render_metrics_svg(log));
  EXPECT_TRUE(with_class(*root, "line", "baseline").empty());
  EXPECT_EQ(series(*root, "val_loss"), nullptr);
  EXPECT_FALSE(contains(root->all_text(), "unigram baseline"));
  EXPECT_FALSE(contains(root->all_text(), "validation loss"));
  ASSERT_NE(series(*root, "loss"), nullptr);
  EXPECT_EQ(points_of(*series(*root, "loss")).size(), 2u);
}

TEST(MetricsPlot, DegenerateRunsDrawWithoutNaN) {
  // One step; all values equal; zero throughput; a tiny spread.
  for (const std::string& text :
       {kStep1, std::string(R"({"type":"step","step":1,"loss":2,"tokens_per_s":0})" "\n"
                            R"({"type":"step","step":2,"loss":2,"tokens_per_s":0})"),
        std::string(R"({"type":"step","step":1,"loss":1e-300,"tokens_per_s":1e-300})" "\n"
                    R"({"type":"step","step":2,"loss":2e-300,"tokens_per_s":0})"),
        std::string(R"({"type":"step","step":1000000000,"loss":-1e300,"tokens_per_s":1e300})")}) {
    const std::string svg = render_metrics_svg(parse_metrics_log(text, "r"));
    EXPECT_FALSE(contains(svg, "nan")) << text;
    EXPECT_FALSE(contains(svg, "inf")) << text;
    const auto root = XmlReader::parse(svg);
    const auto pts = points_of(*series(*root, "loss"));
    ASSERT_FALSE(pts.empty());
    for (const Pt& p : pts) {
      EXPECT_GE(p.x, 0);
      EXPECT_LE(p.x, 900);
      EXPECT_GE(p.y, 0);
      EXPECT_LE(p.y, 600);
    }
  }
  const MetricsLog one = parse_metrics_log(kStep1, "r");
  EXPECT_EQ(with_class(*XmlReader::parse(render_metrics_svg(one)), "circle", "marker").size(), 1u)
      << "a single step is drawn as a dot";
}

TEST(MetricsPlot, RangesBeyondADoubleAreRefused) {
  const MetricsLog log = parse_metrics_log(
      R"({"type":"step","step":1,"loss":-1.5e308,"tokens_per_s":1})" "\n"
      R"({"type":"step","step":2,"loss":1.5e308,"tokens_per_s":1})",
      "r");
  EXPECT_TRUE(contains(error_message([&] { render_metrics_svg(log); }), "the range is too large"));
}

TEST(MetricsPlot, WidthIsBounded) {
  const MetricsLog log = parse_metrics_log(kGoodRun, "run.jsonl");
  for (int width : {kMinMetricsPlotWidth, kMaxMetricsPlotWidth}) {
    MetricsPlotOptions o;
    o.width = width;
    const auto root = XmlReader::parse(render_metrics_svg(log, o));
    EXPECT_EQ(root->number("width"), width);
    EXPECT_EQ(root->number("height"), kMetricsPlotHeight);
    EXPECT_EQ(points_of(*series(*root, "loss")).size(), 12u);
  }
  for (int width : {0, kMinMetricsPlotWidth - 1, kMaxMetricsPlotWidth + 1, 1 << 30}) {
    MetricsPlotOptions o;
    o.width = width;
    EXPECT_TRUE(contains(error_message([&] { render_metrics_svg(log, o); }),
                         detail::concat("plot width must be from 600 to 4000 pixels, got ", width)));
  }
}

TEST(MetricsPlot, TextIsEscaped) {
  MetricsLog log = parse_metrics_log(
      R"({"type":"config","schedule":"<dualpipe & \"co\">"})" "\n" + kStep1, "a<b>&c.jsonl");
  const std::string svg = render_metrics_svg(log);
  const auto root = XmlReader::parse(svg);
  EXPECT_TRUE(contains(root->all_text(), "training run: a<b>&c.jsonl"));
  EXPECT_TRUE(contains(root->all_text(), "<dualpipe & \"co\">"));
}

// A long run is thinned to at most four points per pixel column, keeping each column's extremes, so the
// picture stays small and looks the same.
TEST(MetricsPlot, LongRunsAreThinnedKeepingTheExtremes) {
  MetricsLog log;
  log.source = "long";
  const int n = 100000;
  for (int s = 1; s <= n; ++s) {
    MetricsStep step;
    step.step = s;
    step.loss = 3 + std::sin(s * 0.37);  // within [2, 4]
    step.tokens_per_s = 1000;
    log.steps.push_back(step);
  }
  log.steps[41234].loss = 9.5;   // a spike
  log.steps[77777].loss = -1.0;  // a dip
  const std::string svg = render_metrics_svg(log);
  EXPECT_LT(svg.size(), 300000u);
  const auto root = XmlReader::parse(svg);
  const XmlElement* loss = series(*root, "loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->attr("data-steps"), std::to_string(n));
  const std::vector<Pt> pts = points_of(*loss);
  // The line starts at the first step and ends at the last; the step axis is linear in between.
  const double x_first = pts.front().x, x_last = pts.back().x;
  const auto x_of = [&](int step) { return x_first + (step - 1.0) / (n - 1) * (x_last - x_first); };
  const double columns = x_last - x_first;
  EXPECT_LE(pts.size(), 4 * (columns + 1));
  EXPECT_GE(pts.size(), columns);
  // Higher up is a higher loss: the topmost point is the spike, the lowest the dip, at their steps.
  const Pt* top = &pts[0];
  const Pt* bottom = &pts[0];
  for (std::size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].y < top->y) top = &pts[i];
    if (pts[i].y > bottom->y) bottom = &pts[i];
    if (i > 0) {
      EXPECT_GE(pts[i].x, pts[i - 1].x) << "x never goes back";
    }
  }
  EXPECT_NEAR(top->x, x_of(41235), 1.0);
  EXPECT_NEAR(bottom->x, x_of(77778), 1.0);
  // On the scale from the spike (9.5) to the dip (-1), the sine's maximum 4 and minimum 2 are drawn too:
  // each column keeps its highest and lowest point.
  for (double value : {4.0, 2.0}) {
    const double y = top->y + (9.5 - value) / (9.5 - -1.0) * (bottom->y - top->y);
    double nearest = 1e9;
    for (const Pt& p : pts) nearest = std::min(nearest, std::abs(p.y - y));
    EXPECT_LT(nearest, 0.05) << value;
  }
}

}  // namespace metrics_plot_tests
}  // namespace dualpipe::test
