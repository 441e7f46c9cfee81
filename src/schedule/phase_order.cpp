#include "dualpipe/schedule/phase_order.h"

namespace dualpipe {
namespace {

// Appends `chain`'s phases from `next` until it has started an exchange and run the weight phases after it, or ended.
void take_turn(const std::vector<PhaseStep>& chain, char name, size_t& next, std::vector<PhaseTurn>& order) {
  bool started_exchange = false;
  for (; next < chain.size(); ++next) {
    if (started_exchange && !chain[next].weight) return;
    order.push_back({name, next});
    started_exchange |= chain[next].starts_exchange;
  }
}

}  // namespace

std::vector<PhaseTurn> interleaved_phase_order(const std::vector<PhaseStep>& backward,
                                               const std::vector<PhaseStep>& forward) {
  std::vector<PhaseTurn> order;
  size_t b = 0, f = 0;
  while (b < backward.size() || f < forward.size()) {
    take_turn(backward, 'B', b, order);
    take_turn(forward, 'F', f, order);
  }
  return order;
}

}  // namespace dualpipe
