// Failure detector of a GlooCommunicator, and of the pipelines of Python's DualPipe (src/python_runtime).
//
// Gloo tells a rank only about the peers it is waiting on, and only when their connection breaks: a rank waiting
// on a live neighbour that is itself stuck behind a dead rank learns nothing until its own timeout, and then names
// the neighbour. The monitor keeps one small TCP connection to every peer, outside Gloo, on which a background
// thread exchanges heartbeats. So every rank learns by itself, and names,
//   - a peer whose process died or was killed (the kernel closes its sockets: seen at once), and
//   - a peer that stopped responding (a stopped or frozen process: no heartbeat for `timeout`),
// and aborts the waits in flight, which then fail with that peer's name. A rank that leaves cleanly says
// goodbye first; a rank that leaves because of a lost peer passes that peer's rank on, so a rank that sees the
// messenger's connection close first still names the root cause. A rank that fails but lives on (a Python program
// that catches the error) announces the failure at once, so its peers do not wait for it until their timeout.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace c10d {
class Store;
}

namespace dualpipe::comm {

struct PeerFailure {
  int rank = -1;       // the rank blamed
  std::string reason;  // "peer rank 2 closed the connection (its process exited or was killed)"
  // The blamed rank refused its input (an InvalidArgument there): its peers report the same kind of error.
  bool invalid_input = false;
};

class PeerMonitor {
 public:
  // Connects to every peer through addresses published in `store` (a full mesh; `master_addr` picks the local
  // interface to publish). A peer silent for `timeout` counts as lost. Throws CommError when the mesh cannot form.
  PeerMonitor(c10d::Store& store, const std::string& master_addr, int rank, int world_size,
              std::chrono::milliseconds timeout);
  // A monitor without peers (there is no store to meet them through): it ends this rank's own waits only.
  explicit PeerMonitor(int rank);
  ~PeerMonitor();
  PeerMonitor(const PeerMonitor&) = delete;
  PeerMonitor& operator=(const PeerMonitor&) = delete;

  std::optional<PeerFailure> failure() const;
  // Waits up to `limit` for a failure to be known: a wait that Gloo failed gives the monitor a moment to learn
  // the root cause before the error is worded.
  std::optional<PeerFailure> await_failure(std::chrono::milliseconds limit) const;
  // The peer heard from least recently, when it has been silent for more than two heartbeat intervals: the
  // likely cause of a wait that timed out on a live neighbour.
  std::optional<PeerFailure> silent_peer() const;
  // Records a failure seen elsewhere (a Gloo wait that failed or timed out) unless one is known already.
  void report(const PeerFailure& failure);
  // This rank failed (failure.rank is this rank) and stays alive: records it as report() does, and sends it to
  // every peer now rather than when the monitor is destroyed. Their waits end with `failure`'s reason.
  void announce(const PeerFailure& failure);

  // Short texts the ranks share beside the heartbeats (a rank's state when its pipeline stalls: runtime/
  // stall_watch.h). share() sends `note` to every peer from the monitor thread; notes() holds the latest note
  // received from each peer, by rank. At most kMaxNote bytes (longer is cut).
  static constexpr size_t kMaxNote = 60000;
  void share(std::string note);
  std::map<int, std::string> notes() const;

  // While a Guard lives, a lost peer calls `abort` once, from the monitor thread (so a blocked wait returns).
  class Guard {
   public:
    Guard(PeerMonitor& monitor, std::function<void()> abort);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    PeerMonitor& monitor_;
    std::list<std::function<void()>>::iterator entry_;
  };

 private:
  struct Peer {
    int rank = -1;
    int fd = -1;
    std::chrono::steady_clock::time_point last_heard;
    std::string inbox;  // bytes of a message not complete yet
    bool gone = false;  // said goodbye, or lost
  };
  void run();
  void read_from(Peer& peer, std::chrono::steady_clock::time_point now);
  void lost(const PeerFailure& failure);
  void send_announcement();
  void send_note();
  void leave();

  int rank_;
  std::chrono::milliseconds timeout_, interval_;
  std::vector<Peer> peers_;
  int wake_[2] = {-1, -1};  // pipe that ends the thread's poll
  std::atomic<bool> stop_{false};
  std::atomic<bool> announcing_{false};  // announce() asked the thread to send the failure
  std::atomic<bool> sharing_{false};     // share() asked the thread to send note_
  std::thread thread_;

  mutable std::mutex mutex_;
  mutable std::condition_variable failed_;
  std::optional<PeerFailure> failure_;
  std::list<std::function<void()>> aborts_;
  std::string note_;                 // the note to send
  std::map<int, std::string> notes_;  // received, by rank
};

}  // namespace dualpipe::comm
