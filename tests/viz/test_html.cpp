// The HTML page: the same picture inline, a tooltip per cell with action, start, end and duration, no scripts.
#include <gtest/gtest.h>

#include "dualpipe/sim/simulate.h"
#include "dualpipe/viz/html.h"
#include "viz/picture_support.h"

namespace dualpipe::test {
namespace {

TEST(Html, EmbedsThePictureWithATooltipPerCell) {
  const Schedule s = make_schedule("dualpipe", ScheduleOptions{4, 8});
  const CostModel costs = CostModel::parse("FB=2.5");
  const Timeline t = timeline_from_simulation(s, simulate(s, costs), costs);
  SvgOptions options;
  options.tooltips = false;  // the page turns them on regardless
  const std::string html = render_html({t}, options);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_FALSE(contains(html, "<script"));
  EXPECT_FALSE(contains(html, "src=")) << "nothing loaded from elsewhere";
  EXPECT_FALSE(contains(html, "href")) << "nothing loaded from elsewhere";
  const std::size_t begin = html.find("<svg"), end = html.find("</svg>");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(html.find("<svg", begin + 1), std::string::npos) << "one picture";
  const auto root = XmlReader::parse(html.substr(begin, end + 6 - begin));
  const std::vector<DrawnCell> cells = drawn_cells(*root);
  EXPECT_EQ(cells.size(), s.num_actions());
  for (const DrawnCell& c : cells) {
    EXPECT_TRUE(contains(c.tooltip, c.action + ":")) << c.tooltip;
    const std::string expect = "start " + format_time(c.start, "") + "\nend " + format_time(c.end, "") + "\nduration " +
                               format_time(c.end - c.start, "");
    EXPECT_TRUE(contains(c.tooltip, expect)) << c.tooltip << "\nexpected: " << expect;
  }
  EXPECT_TRUE(contains(html, "<table>")) << "per-rank numbers";
}

}  // namespace
}  // namespace dualpipe::test
