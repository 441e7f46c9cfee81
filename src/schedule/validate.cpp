#include "dualpipe/schedule/validate.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dualpipe/schedule/dependency_walk.h"
#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

// Where one kind of compute action for a (stage, micro-batch) was seen.
struct Seen {
  int count = 0;
  int rank = -1;
  int index = -1;
};

struct Sightings {
  // [stage * M + microbatch]
  std::vector<Seen> forward, backward, input, weight;
  explicit Sightings(std::size_t n) : forward(n), backward(n), input(n), weight(n) {}
};

std::string where(int rank, int index) { return detail::concat("rank ", rank, " position ", index); }

class Validator {
 public:
  explicit Validator(const Schedule& s) : s_(s), seen_(static_cast<std::size_t>(s.num_stages) * s.num_microbatches) {}

  std::vector<std::string> run() {
    if (!check_shape()) return problems_;
    record_compute();
    if (!problems_.empty()) return problems_;
    check_each_stage_microbatch();
    check_communication();
    check_data_parallel();
    if (problems_.empty()) check_deadlock();
    return problems_;
  }

 private:
  void problem(std::string message) { problems_.push_back(std::move(message)); }

  bool check_shape() {
    const Placement& p = s_.placement;
    if (s_.num_ranks < 1 || s_.num_stages < 1 || s_.num_microbatches < 1) {
      problem(detail::concat("a schedule needs at least one rank, stage and micro-batch, got R=", s_.num_ranks,
                             " S=", s_.num_stages, " M=", s_.num_microbatches));
      return false;
    }
    if (static_cast<int>(s_.actions.size()) != s_.num_ranks) {
      problem(detail::concat("the schedule declares ", s_.num_ranks, " ranks but holds action lists for ",
                             s_.actions.size()));
    }
    if (p.num_ranks() != s_.num_ranks || p.num_stages() != s_.num_stages) {
      problem(detail::concat("the placement covers ", p.num_ranks(), " ranks and ", p.num_stages(),
                             " stages, but the schedule has ", s_.num_ranks, " ranks and ", s_.num_stages,
                             " stages"));
    }
    if (p.num_replicas() == 2 && p.num_microbatches() != s_.num_microbatches) {
      problem(detail::concat("the two-direction placement assigns ", p.num_microbatches(),
                             " micro-batches to directions, but the schedule has ", s_.num_microbatches));
    }
    return problems_.empty();
  }

  bool in_range(int stage, int microbatch) const {
    return stage >= 0 && stage < s_.num_stages && microbatch >= 0 && microbatch < s_.num_microbatches;
  }

  // Records one compute action; the message strings are built only when something is wrong (hot path).
  void see(std::vector<Seen>& table, int rank, int index, ActionType type, int stage, int microbatch) {
    Seen& seen = table[static_cast<std::size_t>(stage) * s_.num_microbatches + microbatch];
    if (++seen.count == 1) {
      seen.rank = rank;
      seen.index = index;
    } else {
      problem(detail::concat("duplicated action ", to_string(Action{type, stage, microbatch}), ": at ",
                             where(seen.rank, seen.index), " and again at ", where(rank, index)));
    }
    const int owner = s_.placement.rank(stage, microbatch);
    if (owner != rank) {
      problem(detail::concat("placement mismatch: ", where(rank, index), " runs ",
                             to_string(Action{type, stage, microbatch}), ", but the placement puts stage ", stage,
                             " micro-batch ", microbatch, " on rank ", owner));
    }
  }

  void see_compute(int rank, int index, ActionType type, int stage, int microbatch) {
    switch (type) {
      case ActionType::Forward: see(seen_.forward, rank, index, type, stage, microbatch); break;
      case ActionType::Backward: see(seen_.backward, rank, index, type, stage, microbatch); break;
      case ActionType::BackwardInput: see(seen_.input, rank, index, type, stage, microbatch); break;
      case ActionType::BackwardWeight: see(seen_.weight, rank, index, type, stage, microbatch); break;
      default: break;
    }
  }

  void record_compute() {
    for (int r = 0; r < static_cast<int>(s_.actions.size()); ++r) {
      const auto& actions = s_.actions[r];
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (!in_range(a.stage, a.is_data_parallel() ? 0 : a.microbatch) ||
            (a.type == ActionType::Overlapped && !in_range(a.bwd_stage, a.bwd_microbatch))) {
          problem(detail::concat(where(r, i), ": action ", to_string(a), " is outside stages 0..",
                                 s_.num_stages - 1, " and micro-batches 0..", s_.num_microbatches - 1));
          continue;
        }
        if (a.type == ActionType::Overlapped) {
          see_compute(r, i, ActionType::Forward, a.stage, a.microbatch);
          see_compute(r, i, ActionType::Backward, a.bwd_stage, a.bwd_microbatch);
        } else if (a.is_compute()) {
          see_compute(r, i, a.type, a.stage, a.microbatch);
        }
      }
    }
  }

  // Exactly one F, and either one B or one I followed by one W, with backward after forward on one rank.
  void check_each_stage_microbatch() {
    int forwards = 0, backwards = 0;
    for (int s = 0; s < s_.num_stages; ++s) {
      for (int m = 0; m < s_.num_microbatches; ++m) {
        const std::size_t k = static_cast<std::size_t>(s) * s_.num_microbatches + m;
        const Seen& f = seen_.forward[k];
        const Seen& b = seen_.backward[k];
        const Seen& i = seen_.input[k];
        const Seen& w = seen_.weight[k];
        const int rank = s_.placement.rank(s, m);
        forwards += f.count;
        backwards += b.count + i.count;
        if (f.count == 0) problem(detail::concat("missing action ", s, "F", m, " (expected on rank ", rank, ")"));
        if (b.count == 0 && i.count == 0) {
          problem(detail::concat("missing action ", s, "B", m, " (or ", s, "I", m, " with ", s, "W", m,
                                 "), expected on rank ", rank));
        }
        if (b.count > 0 && i.count > 0) {
          problem(detail::concat("both ", s, "B", m, " (", where(b.rank, b.index), ") and ", s, "I", m, " (",
                                 where(i.rank, i.index), ") run: a backward is either full or split"));
        }
        if (i.count > 0 && w.count == 0) {
          problem(detail::concat("missing action ", s, "W", m, ": ", s, "I", m, " at ", where(i.rank, i.index),
                                 " defers weight gradients that never run"));
        }
        if (w.count > 0 && i.count == 0) {
          problem(detail::concat(s, "W", m, " at ", where(w.rank, w.index), " has no ", s, "I", m,
                                 " before it (W without its I)"));
        }
        const Seen& bwd = b.count > 0 ? b : i;
        if (f.count > 0 && bwd.count > 0 && f.rank == bwd.rank && bwd.index < f.index) {
          problem(detail::concat(where(bwd.rank, bwd.index), ": backward ", s, (b.count ? "B" : "I"), m,
                                 " runs before its forward ", s, "F", m, " at position ", f.index));
        }
        if (i.count > 0 && w.count > 0 && i.rank == w.rank && w.index < i.index) {
          problem(detail::concat(where(w.rank, w.index), ": ", s, "W", m, " runs before its ", s, "I", m,
                                 " at position ", i.index));
        }
      }
    }
    const long expected = static_cast<long>(s_.num_stages) * s_.num_microbatches;
    if (forwards != expected || backwards != expected) {
      problem(detail::concat("counts do not add up: S x M = ", s_.num_stages, " x ", s_.num_microbatches, " = ",
                             expected, " forwards and backwards expected, found ", forwards, " forwards and ",
                             backwards, " backwards"));
    }
  }

  // Every SEND must have its RECV on the peer and vice versa, between the ranks the placement names.
  void check_communication() {
    const Placement& p = s_.placement;
    std::vector<int> balance[2];  // [forward|backward][stage * M + m]: sends minus receives
    std::vector<std::pair<int, int>> last_seen[2];  // (rank, index) of the last SEND/RECV of that message
    for (auto& b : balance) b.assign(static_cast<std::size_t>(s_.num_stages) * s_.num_microbatches, 0);
    for (auto& w : last_seen) w.resize(balance[0].size());
    for (int r = 0; r < static_cast<int>(s_.actions.size()); ++r) {
      const auto& actions = s_.actions[r];
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (!a.is_communication()) continue;
        const bool fwd = a.type == ActionType::SendForward || a.type == ActionType::RecvForward;
        const bool send = a.type == ActionType::SendForward || a.type == ActionType::SendBackward;
        // The message is named by the stage that produces it.
        const int producer = a.type == ActionType::RecvForward ? a.stage - 1
                             : a.type == ActionType::RecvBackward ? a.stage + 1 : a.stage;
        const int consumer = fwd ? producer + 1 : producer - 1;
        if (producer < 0 || producer >= s_.num_stages || consumer < 0 || consumer >= s_.num_stages) {
          problem(detail::concat(where(r, i), ": ", to_string(a), " has no stage on the other end"));
          continue;
        }
        const int self = send ? producer : consumer;
        const int other = p.rank(send ? consumer : producer, a.microbatch);
        if (p.rank(self, a.microbatch) != r || other == r || (a.peer >= 0 && a.peer != other)) {
          problem(detail::concat(where(r, i), ": ", to_string(a), " does not match the placement (stage ", self,
                                 " micro-batch ", a.microbatch, " runs on rank ", p.rank(self, a.microbatch),
                                 ", its peer on rank ", other, ")"));
          continue;
        }
        const std::size_t k = static_cast<std::size_t>(producer) * s_.num_microbatches + a.microbatch;
        balance[fwd ? 0 : 1][k] += send ? 1 : -1;
        last_seen[fwd ? 0 : 1][k] = {r, i};
      }
    }
    for (int d = 0; d < 2; ++d) {
      for (std::size_t k = 0; k < balance[d].size(); ++k) {
        if (balance[d][k] == 0) continue;
        const int s = static_cast<int>(k) / s_.num_microbatches, m = static_cast<int>(k) % s_.num_microbatches;
        problem(detail::concat("unmatched communication for the ", d == 0 ? "forward output of " : "input gradient of ",
                               s, d == 0 ? "F" : "B", m, ": ", balance[d][k] > 0 ? "a SEND without its RECV"
                                                                                  : "a RECV without its SEND",
                               " (", to_string(s_.actions[last_seen[d][k].first][last_seen[d][k].second]),
                               " at ", where(last_seen[d][k].first, last_seen[d][k].second), ")"));
      }
    }
  }

  // A rank's UNSHARD, RESHARD and REDUCE_GRAD of a stage: at most one each, of a stage it holds, the UNSHARD before
  // every compute action of the stage there, the RESHARD after them all (and after its UNSHARD), the REDUCE_GRAD
  // after the last action that adds to the stage's gradients.
  // Also all or nothing: where one rank gathers (UNSHARD) or reduces (REDUCE_GRAD) a stage, every rank does so for
  // every stage it computes (for gradients: that it adds gradients to), or that stage's replicas drift apart; and a
  // stage a rank gathers it drops again (RESHARD), and drops only what it gathered.
  void check_data_parallel() {
    const std::string unshards = first_of(ActionType::Unshard), reduces = first_of(ActionType::ReduceGrad);
    for (int r = 0; r < static_cast<int>(s_.actions.size()); ++r) {
      const auto& actions = s_.actions[r];
      if (unshards.empty() && reduces.empty() &&
          std::none_of(actions.begin(), actions.end(), [](const Action& a) { return a.is_data_parallel(); }))
        continue;  // most schedules: nothing to check, and nothing to allocate
      std::map<std::pair<int, ActionType>, int> at;  // (stage, type) -> index
      std::map<int, std::pair<int, int>> uses, gradients;  // stage -> first and last index
      auto use = [](std::map<int, std::pair<int, int>>& table, int stage, int i) {
        auto [it, fresh] = table.try_emplace(stage, i, i);
        if (!fresh) it->second.second = i;
      };
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (a.is_compute()) {
          use(uses, a.stage, i);
          if (a.type != ActionType::Forward && a.type != ActionType::Overlapped) use(gradients, a.stage, i);
          if (a.type == ActionType::Overlapped) use(uses, a.bwd_stage, i), use(gradients, a.bwd_stage, i);
        } else if (a.is_data_parallel() && !at.emplace(std::make_pair(a.stage, a.type), i).second) {
          problem(detail::concat(where(r, i), ": ", to_string(a), " again (at most one per stage and step, the "
                                 "first at position ", at[{a.stage, a.type}], ")"));
        }
      }
      for (const auto& [key, i] : at) {
        const auto [stage, type] = key;
        const Action& a = actions[i];
        if (!s_.placement.holds(r, stage)) {
          problem(detail::concat(where(r, i), ": ", to_string(a), " names stage ", stage, ", which rank ", r,
                                 " does not hold"));
          continue;
        }
        const auto used = uses.find(stage);
        const auto grads = gradients.find(stage);
        if (type == ActionType::Unshard && used != uses.end() && used->second.first < i)
          problem(detail::concat(where(r, i), ": ", to_string(a), " comes after the stage's first compute action ",
                                 to_string(actions[used->second.first]), " at position ", used->second.first));
        if (type == ActionType::Reshard && used != uses.end() && used->second.second > i)
          problem(detail::concat(where(r, i), ": ", to_string(a), " comes before the stage's last compute action ",
                                 to_string(actions[used->second.second]), " at position ", used->second.second));
        if (type == ActionType::Reshard) {
          const auto unshard = at.find({stage, ActionType::Unshard});
          if (unshard != at.end() && unshard->second > i)
            problem(detail::concat(where(r, i), ": ", to_string(a), " comes before its ", stage, "UNSHARD at position ",
                                   unshard->second));
        }
        if (type == ActionType::ReduceGrad && grads != gradients.end() && grads->second.second > i)
          problem(detail::concat(where(r, i), ": ", to_string(a), " comes before ",
                                 to_string(actions[grads->second.second]), " at position ", grads->second.second,
                                 ", which still adds to the stage's gradients"));
        const ActionType pair = type == ActionType::Unshard ? ActionType::Reshard : ActionType::Unshard;
        if (type != ActionType::ReduceGrad && !at.count({stage, pair}))
          problem(detail::concat(where(r, i), ": ", to_string(a), " has no ", stage, type_name(pair), " on rank ", r,
                                 type == ActionType::Unshard ? ": the gathered parameters are never dropped"
                                                             : ": it drops parameters that were never gathered"));
      }
      const auto require_each = [&](const std::map<int, std::pair<int, int>>& stages, ActionType type,
                                    const std::string& example, const char* what) {
        if (example.empty()) return;
        for (const auto& [stage, span] : stages)
          if (!at.count({stage, type}))
            problem(detail::concat("rank ", r, " ", what, " stage ", stage, " (", to_string(actions[span.first]),
                                   " at position ", span.first, ") without a ", stage, type_name(type),
                                   ", though the schedule has ", example, ": every stage's replicas take part, or none"));
      };
      require_each(uses, ActionType::Unshard, unshards, "computes");
      require_each(gradients, ActionType::ReduceGrad, reduces, "adds gradients to");
    }
  }

  // "0UNSHARD on rank 0": the first action of `type` in the schedule, or "".
  std::string first_of(ActionType type) const {
    for (std::size_t r = 0; r < s_.actions.size(); ++r)
      for (const Action& a : s_.actions[r])
        if (a.type == type) return detail::concat(to_string(a), " on rank ", r);
    return "";
  }

  void check_deadlock() {
    const DependencyWalk walk = walk_dependencies(s_, [](int, const Action&) { return 1.0; });
    for (const BlockedRank& b : walk.blocked) {
      problem(detail::concat("deadlock: rank ", b.rank, " is stuck at ", to_string(s_.actions[b.rank][b.index]),
                             " (position ", b.index, "), waiting for ", b.waiting_for,
                             ", which can never run in the given per-rank orders"));
    }
  }

  const Schedule& s_;
  Sightings seen_;
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> find_problems(const Schedule& schedule) { return Validator(schedule).run(); }

void validate(const Schedule& schedule) {
  const std::vector<std::string> problems = find_problems(schedule);
  if (problems.empty()) return;
  constexpr std::size_t kShown = 10;
  std::string message = detail::concat("invalid ", schedule.kind, " schedule (", problems.size(), " problem",
                                       problems.size() == 1 ? "" : "s", "):");
  for (std::size_t i = 0; i < problems.size() && i < kShown; ++i) message += "\n  " + problems[i];
  if (problems.size() > kShown) message += detail::concat("\n  ... and ", problems.size() - kShown, " more");
  throw InvalidSchedule(message);
}

}  // namespace dualpipe
