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

// --explain: one layout's predicted step split into compute (with its efficiency), recomputation, the exposed and
// hidden tp, cp and ep communication, the bubble, the data-parallel communication and the optimizer, which add up to
// the step; and its memory per GPU by part. The JSON carries the same fields as a row of layout_json.
std::string layout_explanation(const LayoutRequest& request, const LayoutResult& result,
                               const Calibration* calibration = nullptr);
std::string layout_explanation_json(const LayoutRequest& request, const LayoutResult& result,
                                    const Calibration* calibration = nullptr);

}  // namespace dualpipe::layout
