// Colours of the timeline pictures (internal to src/viz). Direction 0 gets the light tone of each colour and
// direction 1 the dark one, so DualPipe's and Chimera's two directions (and the two arms of a V) stand apart
// while the action type stays readable from the hue: F blue, B green, I teal, W orange.
#pragma once

#include <cstdlib>
#include <string>

#include "dualpipe/schedule/action.h"

namespace dualpipe::viz {

inline const char* cell_fill(ActionType type, int direction) {
  const bool dark = direction == 1;
  switch (type) {
    case ActionType::Forward: return dark ? "#2f6ca8" : "#8dbbea";
    case ActionType::Backward: return dark ? "#2b8040" : "#8fd08f";
    case ActionType::BackwardInput: return dark ? "#2f9486" : "#a6e3d8";
    case ActionType::BackwardWeight: return dark ? "#c46a12" : "#f7c48e";
    default: return "#bbbbbb";
  }
}

// Black or white, whichever reads better on a "#rrggbb" fill.
inline const char* text_fill(const char* fill) {
  const long rgb = std::strtol(fill + 1, nullptr, 16);
  const double luminance = 0.299 * ((rgb >> 16) & 255) + 0.587 * ((rgb >> 8) & 255) + 0.114 * (rgb & 255);
  return luminance > 150 ? "#111111" : "#ffffff";
}

constexpr const char* kIdleFill = "#eeeeee";    // a row's band: empty where the rank waits
constexpr const char* kGridStroke = "#d4d4d4";  // time axis grid lines
constexpr const char* kPairFrame = "#1a1a1a";   // the frame that makes an F&B pair one unit
constexpr const char* kCommFill = "#b0288f";   // communication in flight (expert all-to-alls)
constexpr const char* kDataParallelFill = "#6a3d9a";  // a data-parallel collective in flight (gather, reduce)
constexpr const char* kTextFill = "#222222";
constexpr const char* kMutedText = "#555555";

}  // namespace dualpipe::viz
