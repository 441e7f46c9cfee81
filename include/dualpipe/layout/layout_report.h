// The layout planner's results as `dualpipe layout` prints them: a ranked table with the assumptions above it,
// or JSON (docs/layout.md names every field).
#pragma once

#include <string>

#include "dualpipe/layout/calibration.h"
#include "dualpipe/layout/layout.h"

namespace dualpipe::layout {

// calibration: how request.cluster's efficiency was measured, or null when it is the cluster's stated one.
std::string layout_table(const LayoutRequest& request, const LayoutSearch& search,
                         const Calibration* calibration = nullptr);
std::string layout_json(const LayoutRequest& request, const LayoutSearch& search,
                        const Calibration* calibration = nullptr);

}  // namespace dualpipe::layout
