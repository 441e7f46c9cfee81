#include "dualpipe/schedule/schedule.h"

#include <algorithm>
#include <set>

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

std::vector<int> pipeline_peers(const Schedule& schedule, int rank) {
  std::set<int> peers;
  for (int stage = 0; stage < schedule.num_stages; ++stage) {
    const std::vector<int> holders = schedule.placement.ranks_holding(stage);
    if (std::find(holders.begin(), holders.end(), rank) == holders.end()) continue;
    peers.insert(holders.begin(), holders.end());
    for (int m = 0; m < schedule.num_microbatches; ++m) {
      if (schedule.placement.rank(stage, m) != rank) continue;
      if (stage > 0) peers.insert(schedule.placement.rank(stage - 1, m));
      if (stage + 1 < schedule.num_stages) peers.insert(schedule.placement.rank(stage + 1, m));
    }
  }
  peers.erase(rank);
  return {peers.begin(), peers.end()};
}

}  // namespace dualpipe
