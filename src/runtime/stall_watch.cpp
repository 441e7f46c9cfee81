#include "dualpipe/runtime/stall_watch.h"

#include <signal.h>

#include <algorithm>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "dualpipe/comm/peer_monitor.h"
#include "dualpipe/util/atomic_file.h"

namespace dualpipe::runtime {

using json = nlohmann::json;
using dualpipe::detail::concat;

namespace {

std::atomic<unsigned> g_stall_signals{0};

extern "C" void on_stall_signal(int) { g_stall_signals.fetch_add(1, std::memory_order_relaxed); }

// How long the reporter waits for the last states of an episode before it reports without them.
constexpr std::chrono::seconds kCollectFor{2};

}  // namespace

bool install_stall_signal() {
  struct sigaction current {};
  if (sigaction(SIGUSR1, nullptr, &current) != 0) return false;
  if (current.sa_handler == on_stall_signal) return true;
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) return false;
  struct sigaction action {};
  action.sa_handler = on_stall_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(SIGUSR1, &action, nullptr) == 0;
}

unsigned stall_signals_received() { return g_stall_signals.load(std::memory_order_relaxed); }

StallWatch::StallWatch(std::shared_ptr<const FlightRecorder> recorder, comm::PeerMonitor* monitor,
                       StallWatchOptions options)
    : recorder_(std::move(recorder)), monitor_(monitor), options_(std::move(options)) {
  if (!options_.print) options_.print = [](const std::string& text) { std::cerr << text << std::flush; };
  const auto quarter = options_.after / 4;
  tick_ = options_.after.count() > 0
              ? std::clamp(quarter, std::chrono::milliseconds(20), std::chrono::milliseconds(250))
              : std::chrono::milliseconds(250);
  signals_seen_ = stall_signals_received();
  thread_ = std::thread([this] { run(); });
}

StallWatch::~StallWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StallWatch::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, tick_, [&] { return stop_; })) {
    lock.unlock();
    try {
      tick();
    } catch (const std::exception& e) {
      // A report is advice: it never takes the run down.
      options_.print(concat("rank ", options_.world_rank, ": stall report failed: ", e.what(), "\n"));
    }
    lock.lock();
  }
}

void StallWatch::tick() {
  const FlightSnapshot snapshot = recorder_->snapshot();
  int newest = shared_episode_;
  if (monitor_ != nullptr) read_peer_notes();
  for (const auto& [rank, entry] : peers_) newest = std::max(newest, entry.first);
  const bool stalled = options_.after.count() > 0 && snapshot.in_step &&
                       snapshot.taken - snapshot.last_progress >= options_.after &&
                       snapshot.last_progress != armed_at_;
  const unsigned signals = stall_signals_received();
  const bool asked = signals != signals_seen_;
  signals_seen_ = signals;
  const RankStall mine = rank_stall(snapshot, options_.world_rank, options_.to_world);
  if (stalled || asked || newest > shared_episode_) {
    // Join an episode a peer started, else start the next one.
    share(newest > shared_episode_ ? newest : shared_episode_ + 1, mine);
    armed_at_ = snapshot.last_progress;  // this state answers for the stall it is in
  }

  if (options_.world_rank != options_.reporter || shared_episode_ <= reported_episode_) return;
  std::vector<RankStall> states = {mine};
  for (const auto& [rank, entry] : peers_)
    if (entry.first == shared_episode_) states.push_back(entry.second);
  const int world = monitor_ != nullptr ? options_.world_size : 1;
  if (collecting_since_ == FlightClock::time_point{}) collecting_since_ = snapshot.taken;
  if (static_cast<int>(states.size()) < world && snapshot.taken - collecting_since_ < kCollectFor) return;
  report(shared_episode_, std::move(states));
  reported_episode_ = shared_episode_;
  collecting_since_ = {};
}

// The peers' latest states: a note is parsed once, when it differs from the one read before (the monitor keeps
// the last note of each peer for as long as it lives).
void StallWatch::read_peer_notes() {
  for (auto& [rank, note] : monitor_->notes()) {
    std::string& read = peer_notes_[rank];
    if (note == read) continue;
    read = std::move(note);
    const json j = json::parse(read, nullptr, false);
    if (j.is_discarded() || !j.contains("episode") || !j.contains("state")) continue;
    try {
      peers_[rank] = {j.at("episode").get<int>(), rank_stall_from_json(j.at("state"))};
    } catch (const std::exception&) {
      // not a state this build writes
    }
  }
}

void StallWatch::share(int episode, const RankStall& state) {
  shared_episode_ = episode;
  const json note = {{"episode", episode}, {"state", to_json(state)}};
  if (monitor_ != nullptr) monitor_->share(note.dump());
  if (!options_.directory.empty())
    write_file_atomically(concat(options_.directory, "/stall-rank", options_.world_rank, ".json"), note.dump(2) + "\n");
}

void StallWatch::report(int episode, std::vector<RankStall> states) {
  const StallReport report =
      diagnose_stall(std::move(states), monitor_ != nullptr ? options_.world_size : 1);
  options_.print(concat("rank ", options_.world_rank, ": ", report.text()));
  if (!options_.directory.empty()) {
    json j = report.to_json();
    j["episode"] = episode;
    write_file_atomically(options_.directory + "/stall-report.json", j.dump(2) + "\n");
  }
}

}  // namespace dualpipe::runtime
