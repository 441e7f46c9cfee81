#include "dualpipe/schedule/schedule.h"

namespace dualpipe {

std::size_t Schedule::num_actions() const {
  std::size_t total = 0;
  for (const auto& rank_actions : actions) total += rank_actions.size();
  return total;
}

bool Schedule::has_communication() const {
  for (const auto& rank_actions : actions) {
    for (const Action& a : rank_actions) {
      if (a.is_communication()) return true;
    }
  }
  return false;
}

}  // namespace dualpipe
