#include "dualpipe/runtime/flight_recorder.h"

#include <algorithm>

namespace dualpipe::runtime {

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {
  ring_.reserve(capacity_);
  now_.last_progress = FlightClock::now();
}

void FlightRecorder::push(const FlightEvent& event) {
  if (ring_.size() < capacity_) {
    ring_.push_back(event);
  } else {
    ring_[next_] = event;
    next_ = (next_ + 1) % capacity_;
  }
  now_.last_progress = event.end;
}

void FlightRecorder::step_started(int step, const std::string& schedule, uint64_t fingerprint) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.schedule = schedule;
  now_.fingerprint = fingerprint;
  now_.step = step;
  now_.in_step = true;
  now_.sent.clear();
  now_.received.clear();
  now_.last_progress = FlightClock::now();
}

void FlightRecorder::step_ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.in_step = false;
  now_.action.reset();
  now_.wait.reset();
  now_.last_progress = FlightClock::now();
}

void FlightRecorder::action_started(int index, const Action& action) {
  const auto t = FlightClock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  now_.action = FlightEvent{FlightKind::Action, now_.step, index, action, 0, t, t};
  now_.last_progress = t;
}

void FlightRecorder::action_ended() {
  const auto t = FlightClock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!now_.action) return;
  now_.action->end = t;
  push(*now_.action);
  now_.action.reset();
}

void FlightRecorder::message_sent(const Action& message, int peer, int64_t bytes) {
  const auto t = FlightClock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  Action sent = message;
  sent.peer = peer;
  ++now_.sent[peer];
  push(FlightEvent{FlightKind::Send, now_.step, -1, sent, bytes, t, t});
}

void FlightRecorder::waiting_for(const Action& message, int peer, bool receive, int position) {
  const auto t = FlightClock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  now_.wait = FlightWait{message, peer, receive, position, t};
}

void FlightRecorder::message_received(int64_t bytes) {
  const auto t = FlightClock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!now_.wait) return;
  Action received = now_.wait->message;
  received.peer = now_.wait->peer;
  ++now_.received[now_.wait->peer];
  push(FlightEvent{FlightKind::Receive, now_.step, -1, received, bytes, now_.wait->since, t});
  now_.wait.reset();
}

void FlightRecorder::wait_ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.wait.reset();
  now_.last_progress = FlightClock::now();
}

FlightSnapshot FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  FlightSnapshot s = now_;
  s.taken = FlightClock::now();
  s.recent.assign(ring_.begin() + static_cast<std::ptrdiff_t>(next_), ring_.end());
  s.recent.insert(s.recent.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(next_));
  return s;
}

uint64_t fingerprint_of(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace dualpipe::runtime
