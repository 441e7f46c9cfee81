// Reading cells back out of a rendered picture, and the expected durations computed from the cost model's
// numbers by hand (not by CostModel::duration or the renderer), for the picture tests.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/sim/cost_model.h"
#include "test_helpers.h"
#include "viz/xml_reader.h"

namespace dualpipe::test {

struct DrawnCell {
  int timeline = 0, rank = 0, index = 0;  // data-timeline, data-rank, data-index
  std::string action;  // data-action
  std::string type;    // "F", "B", "I", "W" or "pair" (from the class)
  int direction = 0;
  double start = 0, end = 0;  // data-start / data-end
  double x = 0, width = 0;    // the box
  std::vector<double> half_widths;  // pairs: forward half, backward half
  std::vector<std::string> fills;   // fills of the box or the halves
  std::vector<std::string> numbers; // the text labels inside
  std::string tooltip;
};

inline std::vector<DrawnCell> drawn_cells(const XmlElement& root) {
  std::vector<const XmlElement*> groups;
  root.collect([](const XmlElement& e) { return e.name == "g" && e.has_class("cell"); }, groups);
  std::vector<DrawnCell> cells;
  for (const XmlElement* g : groups) {
    DrawnCell c;
    c.timeline = static_cast<int>(g->number("data-timeline"));
    c.rank = static_cast<int>(g->number("data-rank"));
    c.index = static_cast<int>(g->number("data-index"));
    c.action = g->attr("data-action");
    c.direction = static_cast<int>(g->number("data-direction"));
    c.start = g->number("data-start");
    c.end = g->number("data-end");
    for (const char* t : {"F", "B", "I", "W", "pair"})
      if (g->has_class(t)) c.type = t;
    for (const auto& child : g->children) {
      if (child->name == "rect" && child->has_class("box")) {
        c.x = child->number("x");
        c.width = child->number("width");
        if (child->has("fill") && child->attr("fill") != "none") c.fills.push_back(child->attr("fill"));
      } else if (child->name == "rect" && child->has_class("half")) {
        c.half_widths.push_back(child->number("width"));
        c.fills.push_back(child->attr("fill"));
      } else if (child->name == "text") {
        c.numbers.push_back(child->text);
      } else if (child->name == "title") {
        c.tooltip = child->text;
      }
    }
    cells.push_back(c);
  }
  return cells;
}

}  // namespace dualpipe::test
