// The parts of `dualpipe layout`'s output that the ranked table and --explain share (docs/layout.md names every
// field).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dualpipe/layout/calibration.h"
#include "dualpipe/layout/layout.h"

namespace dualpipe::layout {

std::string layout_name(const Layout& layout);  // "tp8 cp1 pp16x2 dp8 ep4"
// The model, the cluster, the assumptions and the calibration, as the first lines of either output.
std::string layout_header(const LayoutRequest& request, const Calibration* calibration);
// The model, the cluster, the calibration and the global batch.
nlohmann::ordered_json layout_request_json(const LayoutRequest& request, const Calibration* calibration);
nlohmann::ordered_json layout_result_json(const LayoutResult& result);

}  // namespace dualpipe::layout
