// Why a pipeline stopped moving, from what every rank's flight recorder says (flight_recorder.h).
//
// Each rank turns its snapshot into a RankStall (ranks and times as every rank can read them: world ranks,
// seconds before the snapshot); the ranks exchange them (stall_watch.h), and one rank diagnoses them together:
//   - schedule_mismatch: the ranks' lowered schedules differ (their fingerprints), whatever else happened;
//   - lost_message: a rank waits for a message its sender has already sent;
//   - inside_action: the ranks' waits lead to a rank that waits on nobody but runs one action for long;
//   - outside_step: ... to a rank that is between steps (optimizer, evaluation, checkpoint, or done);
//   - no_state: ... to a rank that sent no state (stopped, or without stall reports);
//   - cycle: the waits go round (the ranks disagree on the order of their messages);
//   - none: no rank waits (a report asked for by SIGUSR1 while the pipeline moves).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "dualpipe/runtime/flight_recorder.h"

namespace dualpipe::runtime {

struct RankStall {
  int rank = -1;  // world rank
  std::string schedule;
  uint64_t fingerprint = 0;
  int step = -1;
  bool in_step = false;
  std::string action;           // in flight ("" when none)
  double action_seconds = 0;    // since it started
  struct Wait {
    std::string message;  // "0SEND_F5"
    int peer = -1;        // world rank
    bool receive = true;
    int position = 0;
    double seconds = 0;
  };
  std::optional<Wait> wait;
  double idle_seconds = 0;  // since the last action or message
  std::map<int, int> sent, received;  // this step's messages, by world rank of the peer
  struct Event {
    std::string kind;     // "action", "send", "receive"
    std::string name;     // "1F5", "0SEND_F5"
    int peer = -1;        // world rank; -1 for an action
    int64_t bytes = 0;
    int step = -1;
    double ago = 0;       // seconds from its end to the snapshot
    double seconds = 0;   // its duration
  };
  std::vector<Event> recent;  // oldest first
};

// `to_world[r]`: the world rank of communicator rank r of the pipeline (empty: the same).
RankStall rank_stall(const FlightSnapshot& snapshot, int world_rank, const std::vector<int>& to_world = {});

nlohmann::json to_json(const RankStall& state);
// Throws InvalidArgument naming the field when `j` is not a RankStall.
RankStall rank_stall_from_json(const nlohmann::json& j);

struct StallReport {
  std::string cause;   // one of the kinds above
  int rank = -1;       // the rank the cause names (-1: none)
  std::string action;  // the action or message it names ("" when none)
  std::string headline;
  std::vector<std::string> lines;  // one per rank: what it does, waits for, and its last actions
  std::vector<RankStall> ranks;
  std::vector<int> missing;  // world ranks that sent no state

  std::string text() const;  // headline, then the lines
  nlohmann::json to_json() const;
};

StallReport diagnose_stall(std::vector<RankStall> states, int world_size);

}  // namespace dualpipe::runtime
