// The timeline SVG read back as XML: one cell per action, in schedule order, never overlapping on a rank,
// widths proportional to the costs (computed by hand from the cost model), a title with the metrics, a
// legend, and nothing external.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/viz/svg.h"
#include "dualpipe/viz/timeline.h"
#include "viz/picture_support.h"

namespace dualpipe::test {
namespace {

struct Case {
  std::string kind;
  int ranks;
  int microbatches;
  std::string costs;
};

// Everything the issue asks of one rendered schedule.
void check_picture(const Schedule& schedule, const CostModel& costs, const SvgOptions& options = {}) {
  SCOPED_TRACE(schedule.kind + " R=" + std::to_string(schedule.num_ranks) + " M=" +
               std::to_string(schedule.num_microbatches) + " costs " + costs.to_string());
  const Timeline timeline = timeline_from_simulation(schedule, simulate(schedule, costs), costs);
  const std::string svg = render_svg({timeline}, options);
  std::unique_ptr<XmlElement> root;
  ASSERT_NO_THROW(root = XmlReader::parse(svg)) << svg.substr(0, 500);
  ASSERT_EQ(root->name, "svg");
  const std::vector<DrawnCell> cells = drawn_cells(*root);

  // One cell per compute action, and per rank in the schedule's order, left to right, without overlap.
  std::size_t compute = 0;
  for (const auto& rank : schedule.actions)
    for (const Action& a : rank) compute += a.is_compute();
  ASSERT_EQ(cells.size(), compute);
  std::map<int, std::vector<const DrawnCell*>> by_rank;
  for (const DrawnCell& c : cells) by_rank[c.rank].push_back(&c);  // document order
  ASSERT_EQ(static_cast<int>(by_rank.size()), schedule.num_ranks);
  for (int r = 0; r < schedule.num_ranks; ++r) {
    const std::vector<const DrawnCell*>& row = by_rank[r];
    ASSERT_EQ(row.size(), schedule.actions[r].size()) << "rank " << r;
    for (std::size_t i = 0; i < row.size(); ++i) {
      EXPECT_EQ(row[i]->index, static_cast<int>(i)) << "rank " << r << ": cells out of schedule order";
      EXPECT_EQ(row[i]->action, to_string(schedule.actions[r][i])) << "rank " << r << " position " << i;
      if (i > 0) {
        EXPECT_LE(row[i - 1]->x + row[i - 1]->width, row[i]->x + 1e-6)
            << "rank " << r << ": " << row[i - 1]->action << " overlaps " << row[i]->action;
        EXPECT_LT(row[i - 1]->x, row[i]->x) << "rank " << r << ": x must increase along the schedule";
      }
    }
  }

  // Widths proportional to the costs, and positions proportional to the start times.
  // The scale is measured over the whole picture (pixel positions are rounded to 0.01 px each).
  double x_min = 1e300, x_max = -1e300, t_min = 1e300, t_max = -1e300;
  for (const DrawnCell& c : cells) {
    const Action a = parse_action(c.action);
    EXPECT_NEAR(c.end - c.start, expected_duration(costs, a), 1e-9) << c.action << " lasts what the costs say";
    x_min = std::min(x_min, c.x), x_max = std::max(x_max, c.x + c.width);
    t_min = std::min(t_min, c.start), t_max = std::max(t_max, c.end);
  }
  const double ratio = (x_max - x_min) / (t_max - t_min);
  ASSERT_GT(ratio, 0);
  const DrawnCell ref{0, 0, 0, "", "", 0, t_min, t_min, x_min, 0, {}, {}, {}, ""};
  for (const DrawnCell& c : cells) {
    const Action a = parse_action(c.action);
    const double d = expected_duration(costs, a);
    EXPECT_NEAR(c.width, ratio * d, 0.02) << c.action << " on rank " << c.rank;
    EXPECT_NEAR(c.x - ref.x, ratio * (c.start - ref.start), 0.02) << c.action << " on rank " << c.rank;
    if (c.type == "pair") {
      ASSERT_EQ(c.half_widths.size(), 2u) << c.action;
      EXPECT_NEAR(c.half_widths[0] + c.half_widths[1], c.width, 0.015) << c.action;
      const double f = expected_duration(costs, a.forward_half()), b = expected_duration(costs, a.backward_half());
      EXPECT_NEAR(c.half_widths[0], c.width * f / (f + b), 0.015) << c.action << ": halves in the F:B ratio";
      EXPECT_EQ(c.numbers, (std::vector<std::string>{std::to_string(a.microbatch), std::to_string(a.bwd_microbatch)}))
          << c.action;
    } else {
      EXPECT_EQ(c.type, std::string(type_name(a.type))) << c.action;
      EXPECT_EQ(c.numbers, std::vector<std::string>{std::to_string(a.microbatch)}) << c.action;
    }
  }

  // Title with schedule, parameters and metrics.
  const std::string text = root->all_text();
  for (const std::string& word : {schedule.kind, std::to_string(schedule.num_ranks) + " ranks",
                                  std::to_string(schedule.num_microbatches) + " micro-batches", std::string("largest idle "),
                                  std::string("span rate"), std::string("step time"), std::string("peak activations"),
                                  std::string("F forward"), std::string("idle")}) {
    EXPECT_TRUE(contains(text, word)) << "missing '" << word << "'";
  }
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.kind << " R=" << c.ranks << " M=" << c.microbatches << " costs '" << c.costs << "'";
}

class SvgCells : public ::testing::TestWithParam<Case> {};

TEST_P(SvgCells, OneCellPerActionInOrderProportionalToCosts) {
  const Case& c = GetParam();
  Schedule schedule;
  try {
    schedule = make_schedule(c.kind, ScheduleOptions{c.ranks, c.microbatches});
  } catch (const InvalidArgument& e) {
    GTEST_SKIP() << e.what();
  }
  check_picture(schedule, CostModel::parse(c.costs));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const GeneratorInfo& g : generators()) {
    for (const char* costs : {"", "F=1,B=2,W=0.5,FB=2.4", "F=1.5,B=2.5,W=1,comm=0.25,scale=1:2:1:1.5"}) {
      out.push_back({std::string(g.name), 4, 8, costs});
    }
    out.push_back({std::string(g.name), 8, 16, ""});
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.kind + "_R" + std::to_string(info.param.ranks) + "_M" +
                     std::to_string(info.param.microbatches) + "_costs" + std::to_string(info.index % 4);  // 0-2: the three cost models at R=4, 3: R=8
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllKinds, SvgCells, ::testing::ValuesIn(cases()), case_name);

TEST(Svg, FixedWidthKeepsProportions) {
  const Schedule s = make_schedule("1f1b", ScheduleOptions{4, 8});
  SvgOptions options;
  options.width = 700;
  check_picture(s, CostModel{}, options);
  const Timeline t = timeline_from_simulation(s, simulate(s, CostModel{}), CostModel{});
  const auto root = XmlReader::parse(render_svg({t}, options));
  EXPECT_EQ(root->attr("width"), "700");
}

TEST(Svg, HasNoExternalReferences) {
  const Schedule s = make_schedule("dualpipe", ScheduleOptions{4, 8});
  const Timeline t = timeline_from_simulation(s, simulate(s, CostModel{}), CostModel{});
  const std::string svg = render_svg({t});
  const auto root = XmlReader::parse(svg);
  std::vector<const XmlElement*> all;
  root->collect([](const XmlElement&) { return true; }, all);
  all.push_back(root.get());
  for (const XmlElement* e : all) {
    for (const char* banned : {"script", "image", "foreignObject", "use", "link", "iframe", "object"})
      EXPECT_NE(e->name, banned) << "external or active content";
    for (const auto& [key, value] : e->attributes) {
      EXPECT_EQ(key.find("href"), std::string::npos) << "<" << e->name << " " << key << ">";
      EXPECT_EQ(key.rfind("on", 0), std::string::npos) << "event handler " << key;
      EXPECT_EQ(value.find("url("), std::string::npos) << key << "=" << value;
      if (key != "xmlns") {
        EXPECT_EQ(value.find("http"), std::string::npos) << key << "=" << value;
      }
    }
  }
  for (const char* banned : {"@font-face", "@import", "url(", "<script", "<image"})
    EXPECT_FALSE(contains(svg, banned)) << banned;
}

TEST(Svg, DualPipeDirectionsHaveDifferentShades) {
  const Schedule s = make_schedule("dualpipe", ScheduleOptions{4, 8});
  const Timeline t = timeline_from_simulation(s, simulate(s, CostModel{}), CostModel{});
  const auto root = XmlReader::parse(render_svg({t}));
  std::map<int, std::set<std::string>> forward_fills;
  for (const DrawnCell& c : drawn_cells(*root)) {
    if (c.type != "F") continue;
    const Action a = parse_action(c.action);
    // Direction 1 carries micro-batches M/2 .. M-1 (spec section 4).
    EXPECT_EQ(c.direction, a.microbatch >= 4 ? 1 : 0) << c.action;
    forward_fills[c.direction].insert(c.fills.at(0));
  }
  ASSERT_EQ(forward_fills[0].size(), 1u);
  ASSERT_EQ(forward_fills[1].size(), 1u);
  EXPECT_NE(*forward_fills[0].begin(), *forward_fills[1].begin());
}

TEST(Svg, IdleTimeIsEmptySpaceInTheRowBand) {
  const Schedule s = make_schedule("1f1b", ScheduleOptions{4, 8});
  const CostModel costs;
  const Simulation sim = simulate(s, costs);
  const auto root = XmlReader::parse(render_svg({timeline_from_simulation(s, sim, costs)}));
  std::vector<const XmlElement*> rows;
  root->collect([](const XmlElement& e) { return e.name == "g" && e.has_class("row"); }, rows);
  ASSERT_EQ(rows.size(), 4u);
  const std::vector<DrawnCell> cells = drawn_cells(*root);
  const double ratio = cells[0].width / (cells[0].end - cells[0].start);
  for (const XmlElement* row : rows) {
    const int r = static_cast<int>(row->number("data-rank"));
    const XmlElement* band = nullptr;
    for (const auto& child : row->children)
      if (child->has_class("band")) band = child.get();
    ASSERT_NE(band, nullptr) << "rank " << r;
    double drawn = 0;
    for (const DrawnCell& c : cells) drawn += c.rank == r ? c.width : 0;
    EXPECT_NEAR(band->number("width") - drawn, ratio * sim.metrics.per_rank[r].idle, 0.05) << "rank " << r;
  }
}

TEST(Svg, ComparisonSharesOneTimeAxis) {
  const CostModel costs;
  std::vector<Timeline> timelines;
  std::size_t actions = 0;
  for (const char* kind : {"gpipe", "1f1b", "zb-h1"}) {
    const Schedule s = make_schedule(kind, ScheduleOptions{4, 8});
    timelines.push_back(timeline_from_simulation(s, simulate(s, costs), costs));
    actions += s.num_actions();
  }
  const auto root = XmlReader::parse(render_svg(timelines));
  std::vector<const XmlElement*> panels;
  root->collect([](const XmlElement& e) { return e.name == "g" && e.has_class("timeline"); }, panels);
  ASSERT_EQ(panels.size(), 3u);
  const std::vector<DrawnCell> cells = drawn_cells(*root);
  EXPECT_EQ(cells.size(), actions);
  // The first forward of every schedule starts at time 0 and is drawn at the same x with the same width.
  std::vector<const DrawnCell*> first;
  for (const DrawnCell& c : cells)
    if (c.rank == 0 && c.index == 0) first.push_back(&c);
  ASSERT_EQ(first.size(), 3u);
  for (const DrawnCell* c : first) {
    EXPECT_EQ(c->x, first[0]->x);
    EXPECT_EQ(c->width, first[0]->width);
  }
  const std::string text = root->all_text();
  EXPECT_TRUE(contains(text, "3 schedules compared"));
  for (const Timeline& t : timelines) EXPECT_TRUE(contains(text, t.summary)) << t.summary;
}

TEST(Svg, EightRanksFortyMicroBatchesKeepEveryNumberReadable) {
  const Schedule s = make_schedule("dualpipe", ScheduleOptions{8, 40});
  const CostModel costs;
  const auto root = XmlReader::parse(render_svg({timeline_from_simulation(s, simulate(s, costs), costs)}));
  EXPECT_LE(root->number("width"), 4000);
  for (const DrawnCell& c : drawn_cells(*root)) EXPECT_FALSE(c.numbers.empty()) << c.action;
  for (const XmlElement* text : root->find_all("text"))
    if (text->has("font-size") && text->name == "text") {
      EXPECT_GE(text->number("font-size"), 9) << text->text;
    }
}

TEST(Svg, RejectsWhatItCannotDraw) {
  EXPECT_TRUE(contains(error_message([] { render_svg({}); }), "no timeline"));
  const Schedule s = make_schedule("gpipe", ScheduleOptions{2, 2});
  Timeline t = timeline_from_simulation(s, simulate(s, CostModel{}), CostModel{});
  SvgOptions narrow;
  narrow.width = 100;
  EXPECT_TRUE(contains(error_message([&] { render_svg({t}, narrow); }), "width must be 300 to 20000 px, got 100"));
  SvgOptions wide;
  wide.width = 20001;
  EXPECT_TRUE(contains(error_message([&] { render_svg({t}, wide); }), "width must be 300 to 20000 px, got 20001"));
  Timeline measured = t;
  measured.time_unit = "us";
  EXPECT_TRUE(contains(error_message([&] { render_svg({t, measured}); }), "different time units"));
  // Finite times further apart than the largest double (a trace with ts -1e308 and 1e308): the scale was 0
  // pixels per unit and every position NaN (found by UBSan's float-divide-by-zero, scripts/test_sanitized.sh).
  Timeline far = t;
  far.rows[0].cells.front().start = -1e308;
  far.rows[0].cells.back().end = 1e308;
  EXPECT_TRUE(contains(error_message([&] { render_svg({far}); }), "time range is too large"));
}

TEST(Svg, EscapesTitles) {
  const Schedule s = make_schedule("gpipe", ScheduleOptions{2, 2});
  Timeline t = timeline_from_simulation(s, simulate(s, CostModel{}), CostModel{});
  t.title = "a <b> & \"c\"";
  const auto root = XmlReader::parse(render_svg({t}));
  EXPECT_TRUE(contains(root->all_text(), "a <b> & \"c\""));
}

// All-to-all spans of a measured MoE step: a strip per span in its rank's row, on the cells' scale, along the
// row's top edge for track 0 and its bottom edge for track 1, and a legend entry only when there are any.
TEST(Svg, AllToAllSpansAreStripsOnTheCellsScale) {
  const Schedule s = make_schedule("1f1b", ScheduleOptions{2, 4});
  const CostModel costs;
  Timeline timeline = timeline_from_simulation(s, simulate(s, costs), costs);
  const std::string plain = render_svg({timeline});
  EXPECT_FALSE(contains(plain, "all-to-all"));
  timeline.rows[0].spans = {{"dispatch", 0, 0.25, 0.75}, {"combine backward", 1, 3.0, 3.5}};
  timeline.rows[1].spans = {{"dispatch", 0, 1.5, 2.0}};
  const auto root = XmlReader::parse(render_svg({timeline}));
  const std::vector<DrawnCell> cells = drawn_cells(*root);
  const double ratio = cells[0].width / (cells[0].end - cells[0].start);
  std::vector<const XmlElement*> rows;
  root->collect([](const XmlElement& e) { return e.name == "g" && e.has_class("row"); }, rows);
  ASSERT_EQ(rows.size(), 2u);
  for (std::size_t r = 0; r < 2; ++r) {
    std::vector<const XmlElement*> spans;
    rows[r]->collect([](const XmlElement& e) { return e.name == "g" && e.has_class("span"); }, spans);
    ASSERT_EQ(spans.size(), timeline.rows[r].spans.size()) << "rank " << r;
    double band_y = 0, band_height = 0, band_x = 0;
    for (const auto& child : rows[r]->children)
      if (child->has_class("band")) band_y = child->number("y"), band_height = child->number("height"),
                                    band_x = child->number("x");
    for (std::size_t i = 0; i < spans.size(); ++i) {
      const TimelineSpan& want = timeline.rows[r].spans[i];
      const XmlElement* rect = nullptr;
      for (const auto& child : spans[i]->children)
        if (child->name == "rect") rect = child.get();
      ASSERT_NE(rect, nullptr);
      EXPECT_EQ(spans[i]->number("data-track"), want.track);
      EXPECT_NEAR(rect->number("x") - band_x, ratio * want.start, 0.02) << want.name;
      EXPECT_NEAR(rect->number("width"), ratio * (want.end - want.start), 0.02) << want.name;
      const double y = rect->number("y"), h = rect->number("height");
      if (want.track == 0) EXPECT_DOUBLE_EQ(y, band_y) << "track 0 along the top edge";
      else EXPECT_DOUBLE_EQ(y + h, band_y + band_height) << "track 1 along the bottom edge";
      EXPECT_LT(h, band_height / 2);
    }
  }
  EXPECT_TRUE(contains(root->all_text(), "all-to-all in flight"));
}

}  // namespace
}  // namespace dualpipe::test
