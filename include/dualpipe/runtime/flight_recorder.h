// What a rank of a pipeline was doing lately, kept always (docs/runtime.md, "Stalls"): the action it runs, the
// message it waits for, how many messages it sent to and received from each peer this step, and its last actions
// and messages. A StallWatch (stall_watch.h) reads it from another thread when the pipeline stops moving, so the
// ranks can say together which of them everyone waits on.
//
// The executor writes to it at every action and message; each write takes an uncontended lock and copies a few
// words (no allocation once the ring is full), which docs/benchmarks.md ("The flight recorder") measures.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/schedule/action.h"

namespace dualpipe::runtime {

using FlightClock = std::chrono::steady_clock;

enum class FlightKind : std::uint8_t { Action, Send, Receive };

// An action, or a message. A message is named by the SEND action that carries it ("1SEND_F5": stage 1's output
// of micro-batch 5), whose peer is the rank at the other end (communicator rank).
struct FlightEvent {
  FlightKind kind = FlightKind::Action;
  int step = -1;   // the executor's step number (0 first)
  int index = -1;  // an action's position in its rank's actions; -1 for a message
  Action action;
  int64_t bytes = 0;  // a message's
  FlightClock::time_point start, end;  // a send: when posted (start = end); a receive: the wait for it
};

// A wait the rank is blocked in: for a message from `peer`, or for its own message to `peer` to leave.
struct FlightWait {
  Action message;
  int peer = -1;         // communicator rank
  bool receive = true;
  int position = 0;      // a receive: how many messages from `peer` this step came before it
  FlightClock::time_point since;
};

struct FlightSnapshot {
  FlightClock::time_point taken;
  std::string schedule;      // "dualpipev, 2 ranks, 8 micro-batches"
  uint64_t fingerprint = 0;  // of the lowered schedule: ranks that disagree ran different ones
  int step = -1;             // the step in flight, or the last one
  bool in_step = false;
  std::optional<FlightEvent> action;  // the action in flight (in_step)
  std::optional<FlightWait> wait;
  FlightClock::time_point last_progress;  // the last action started or ended, or message moved
  std::map<int, int> sent, received;      // this step's messages, by communicator rank of the peer
  std::vector<FlightEvent> recent;        // completed actions and messages, oldest first
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity = 24);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // `schedule` and `fingerprint` name what the step runs (FlightSnapshot).
  void step_started(int step, const std::string& schedule, uint64_t fingerprint);
  void step_ended();
  void action_started(int index, const Action& action);
  void action_ended();
  void message_sent(const Action& message, int peer, int64_t bytes);
  // The wait for a message begins; message_received (or wait_ended, for a send) ends it.
  void waiting_for(const Action& message, int peer, bool receive, int position);
  void message_received(int64_t bytes);
  void wait_ended();

  FlightSnapshot snapshot() const;

 private:
  void push(const FlightEvent& event);  // under the lock

  mutable std::mutex mutex_;
  FlightSnapshot now_;
  std::vector<FlightEvent> ring_;
  size_t next_ = 0;  // where the next event goes once the ring is full
  size_t capacity_;
};

// FNV-1a of a text: the same on every rank and build, unlike std::hash.
uint64_t fingerprint_of(const std::string& text);

}  // namespace dualpipe::runtime
