#include "dualpipe/schedule/lower.h"

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

class Lowering {
 public:
  Lowering(const Schedule& s, int rank, std::vector<Action>& out) : s_(s), rank_(rank), out_(out) {}

  // Receives this half needs from other ranks, placed before the compute action.
  void receives(ActionType type, int stage, int m) {
    if (type == ActionType::Forward) {
      if (stage > 0) message(ActionType::RecvForward, stage, m, s_.placement.rank(stage - 1, m));
    } else if (type == ActionType::Backward || type == ActionType::BackwardInput) {
      if (stage + 1 < s_.num_stages) message(ActionType::RecvBackward, stage, m, s_.placement.rank(stage + 1, m));
    }
  }

  // Sends of what this half produced for other ranks, placed after the compute action.
  void sends(ActionType type, int stage, int m) {
    if (type == ActionType::Forward) {
      if (stage + 1 < s_.num_stages) message(ActionType::SendForward, stage, m, s_.placement.rank(stage + 1, m));
    } else if (type == ActionType::Backward || type == ActionType::BackwardInput) {
      if (stage > 0) message(ActionType::SendBackward, stage, m, s_.placement.rank(stage - 1, m));
    }
  }

 private:
  void message(ActionType type, int stage, int m, int peer) {
    if (peer != rank_) out_.push_back(Action::communication(type, stage, m, peer));
  }

  const Schedule& s_;
  int rank_;
  std::vector<Action>& out_;
};

}  // namespace

Schedule lower_communication(const Schedule& schedule) {
  DUALPIPE_REQUIRE(!schedule.has_communication(),
                   "lower_communication takes a compute-only schedule; this one already holds SEND/RECV actions");
  Schedule lowered = schedule;  // the same shape and placement; each rank's actions made again below
  for (int r = 0; r < static_cast<int>(schedule.actions.size()); ++r) {
    const auto& compute = schedule.actions[r];
    auto& out = lowered.actions[r];
    out.clear();
    out.reserve(compute.size() * 3);
    Lowering lowering(schedule, r, out);
    for (const Action& a : compute) {
      if (a.type == ActionType::Overlapped) {
        lowering.receives(ActionType::Forward, a.stage, a.microbatch);
        lowering.receives(ActionType::Backward, a.bwd_stage, a.bwd_microbatch);
        out.push_back(a);
        lowering.sends(ActionType::Forward, a.stage, a.microbatch);
        lowering.sends(ActionType::Backward, a.bwd_stage, a.bwd_microbatch);
      } else {
        lowering.receives(a.type, a.stage, a.microbatch);
        out.push_back(a);
        lowering.sends(a.type, a.stage, a.microbatch);
      }
    }
  }
  return lowered;
}

}  // namespace dualpipe
