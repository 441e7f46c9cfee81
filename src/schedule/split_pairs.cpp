#include "dualpipe/schedule/split_pairs.h"

#include "dualpipe/util/error.h"

namespace dualpipe {

Schedule split_overlapped_pairs(const Schedule& schedule) {
  DUALPIPE_REQUIRE(!schedule.has_communication(), "split_overlapped_pairs takes a compute-only schedule; this one "
                                                  "already holds SEND/RECV actions, placed around its pairs");
  Schedule split = schedule;
  for (auto& actions : split.actions) {
    std::vector<Action> halves;
    halves.reserve(actions.size() * 2);
    for (const Action& a : actions) {
      if (a.type != ActionType::Overlapped) {
        halves.push_back(a);
        continue;
      }
      halves.push_back(Action::forward(a.stage, a.microbatch));
      halves.push_back(a.backward_half());
    }
    actions = std::move(halves);
  }
  return split;
}

}  // namespace dualpipe
