// Says why a pipeline stalls, within seconds, while it still waits (docs/runtime.md, "Stalls").
//
// A thread on every rank looks at the rank's flight recorder (flight_recorder.h). When the rank has made no
// progress for `after` (no action started or ended, no message moved) inside a step, or when the process got
// SIGUSR1 (install_stall_signal), it sends its state to every peer over the peer monitor's connections
// (comm/peer_monitor.h), and every rank that receives one answers with its own. The reporting rank diagnoses the
// states together (stall_report.h) and prints one report naming the rank everyone waits on: "rank 0 waits for
// 1SEND_B3 from rank 1 (5.0 s); rank 1 is inside 1F3 for 5.2 s". Nothing stops: the waits still end with their
// timeout, and the watch re-arms once the rank moves again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dualpipe/runtime/flight_recorder.h"
#include "dualpipe/runtime/stall_report.h"

namespace dualpipe::comm {
class PeerMonitor;
}

namespace dualpipe::runtime {

struct StallWatchOptions {
  // No progress for this long inside a step makes a stall; 0 turns the watch off (SIGUSR1 still reports).
  std::chrono::milliseconds after{10000};
  int world_rank = 0, world_size = 1;
  std::vector<int> to_world;  // communicator rank of the pipeline -> world rank (empty: the same)
  int reporter = 0;           // the world rank that prints the report
  // Each rank writes its state to <directory>/stall-rank<r>.json, the reporter the report to stall-report.json
  // ("": no files).
  std::string directory;
  // Where the reporter's text goes (default: stderr).
  std::function<void(const std::string&)> print;
};

class StallWatch {
 public:
  // Without a monitor (or alone) a rank reports only its own state.
  StallWatch(std::shared_ptr<const FlightRecorder> recorder, comm::PeerMonitor* monitor, StallWatchOptions options);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

 private:
  void run();
  void tick();
  void read_peer_notes();
  void share(int episode, const RankStall& state);
  void report(int episode, std::vector<RankStall> states);

  std::shared_ptr<const FlightRecorder> recorder_;
  comm::PeerMonitor* monitor_;
  StallWatchOptions options_;
  std::chrono::milliseconds tick_;

  int shared_episode_ = 0;    // the last episode this rank sent its state for
  int reported_episode_ = 0;  // the reporter's: the last episode it printed
  FlightClock::time_point collecting_since_{};
  FlightClock::time_point armed_at_{};  // the progress time of the last stall reported: no second report for it
  unsigned signals_seen_ = 0;
  std::map<int, std::string> peer_notes_;                // as last read from the monitor, by rank
  std::map<int, std::pair<int, RankStall>> peers_;       // parsed: (episode, state), by rank

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// SIGUSR1 asks every StallWatch of the process for a report, without stopping anything. Installed only where
// SIGUSR1 still has its default action (a program's own handler stays). Returns whether it is installed.
bool install_stall_signal();
unsigned stall_signals_received();

}  // namespace dualpipe::runtime
