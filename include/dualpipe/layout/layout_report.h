// The layout planner's results as `dualpipe layout` prints them: a ranked table with the assumptions above it,
// or JSON (docs/layout.md names every field).
#pragma once

#include <string>

#include "dualpipe/layout/layout.h"

namespace dualpipe::layout {

std::string layout_table(const LayoutRequest& request, const LayoutSearch& search);
std::string layout_json(const LayoutRequest& request, const LayoutSearch& search);

}  // namespace dualpipe::layout
