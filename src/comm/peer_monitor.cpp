#include "dualpipe/comm/peer_monitor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/comm/socket_mesh.h"

namespace dualpipe::comm {
namespace {

using Clock = std::chrono::steady_clock;
using dualpipe::detail::concat;

// Messages on a monitor connection: one byte; 'X' and 'I' are followed by the blamed rank (4 bytes), the length
// of the reason (2 bytes), both in network order, and the reason. 'I' says the blamed rank refused its input.
// 'N' is followed by the length of a note (4 bytes, network order) and the note.
constexpr char kHeartbeat = 'H';
constexpr char kNote = 'N';
constexpr char kGoodbye = 'B';
constexpr char kLeavingBecause = 'X';
constexpr char kLeavingBecauseOfInput = 'I';

// The message that passes `failure` on: the blamed rank and why, without what earlier messengers added (it stays
// short and says the cause).
std::string failure_message(const PeerFailure& failure) {
  std::string reason = failure.reason.substr(0, failure.reason.find(" (reported by rank "));
  reason.resize(std::min<size_t>(reason.size(), 1000));
  uint32_t blamed = htonl(static_cast<uint32_t>(failure.rank));
  uint16_t length = htons(static_cast<uint16_t>(reason.size()));
  std::string message(1, failure.invalid_input ? kLeavingBecauseOfInput : kLeavingBecause);
  message.append(reinterpret_cast<const char*>(&blamed), sizeof blamed);
  message.append(reinterpret_cast<const char*>(&length), sizeof length);
  return message + reason;
}

std::string seconds_text(Clock::duration d) {
  double s = std::chrono::duration<double>(d).count();
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", s);
  return text;
}

// Sends all of `message` on a non-blocking socket, waiting up to a second for room (a note can be longer than
// what the socket takes at once; a heartbeat must not land inside it).
void send_all(int fd, const std::string& message) {
  size_t done = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (done < message.size() && Clock::now() < deadline) {
    const ssize_t n = ::send(fd, message.data() + done, message.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 50);
    } else {
      return;  // the peer is gone: its reader will say so
    }
  }
}

[[noreturn]] void fail(int rank, const std::string& what) {
  throw CommError(concat("rank ", rank, ": peer monitor: ", what, ": ", std::strerror(errno)));
}

}  // namespace

PeerMonitor::PeerMonitor(c10d::Store& store, const std::string& master_addr, int rank, int world_size,
                         std::chrono::milliseconds timeout)
    : rank_(rank),
      timeout_(timeout),
      interval_(std::clamp(timeout / 6, std::chrono::milliseconds(50), std::chrono::milliseconds(1000))) {
  if (world_size <= 1) return;
  const std::vector<int> sockets =
      connect_socket_mesh(store, "dualpipe/peer_monitor", master_addr, rank, world_size, timeout, "peer monitor");
  for (int peer = 0; peer < world_size; ++peer) {
    const int fd = sockets[static_cast<size_t>(peer)];
    if (fd < 0) continue;
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    peers_.push_back(Peer{peer, fd, Clock::now(), {}, false});
  }
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) fail(rank, "pipe");
  thread_ = std::thread([this] { run(); });
}

PeerMonitor::PeerMonitor(int rank) : rank_(rank), timeout_(0), interval_(0) {}

PeerMonitor::~PeerMonitor() {
  if (thread_.joinable()) {
    stop_ = true;
    char byte = 0;
    (void)!::write(wake_[1], &byte, 1);
    thread_.join();
  }
  leave();
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

std::optional<PeerFailure> PeerMonitor::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

std::optional<PeerFailure> PeerMonitor::await_failure(std::chrono::milliseconds limit) const {
  std::unique_lock<std::mutex> lock(mutex_);
  failed_.wait_for(lock, limit, [&] { return failure_.has_value(); });
  return failure_;
}

std::optional<PeerFailure> PeerMonitor::silent_peer() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Peer* quietest = nullptr;
  for (const Peer& p : peers_)
    if (!p.gone && (quietest == nullptr || p.last_heard < quietest->last_heard)) quietest = &p;
  if (quietest == nullptr || Clock::now() - quietest->last_heard < 2 * interval_ + std::chrono::milliseconds(200))
    return std::nullopt;
  return PeerFailure{quietest->rank, concat("rank ", quietest->rank, " stopped responding (no heartbeat for ",
                                            seconds_text(Clock::now() - quietest->last_heard), " s)")};
}

void PeerMonitor::report(const PeerFailure& failure) { lost(failure); }

void PeerMonitor::announce(const PeerFailure& failure) {
  lost(failure);
  if (!thread_.joinable()) return;  // no peers
  announcing_ = true;
  const char byte = 1;
  (void)!::write(wake_[1], &byte, 1);
}

void PeerMonitor::share(std::string note) {
  if (!thread_.joinable()) return;  // no peers
  note.resize(std::min(note.size(), kMaxNote));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    note_ = std::move(note);
  }
  sharing_ = true;
  const char byte = 1;
  (void)!::write(wake_[1], &byte, 1);
}

std::map<int, std::string> PeerMonitor::notes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return notes_;
}

void PeerMonitor::send_note() {
  std::string message(1, kNote);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint32_t length = htonl(static_cast<uint32_t>(note_.size()));
    message.append(reinterpret_cast<const char*>(&length), sizeof length);
    message += note_;
  }
  for (Peer& p : peers_)
    if (!p.gone) send_all(p.fd, message);
}

// On the monitor thread, which alone writes to the connections while it runs (a heartbeat cannot split the
// message).
void PeerMonitor::send_announcement() {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    message = failure_message(*failure_);
  }
  for (Peer& p : peers_)
    if (!p.gone) (void)::send(p.fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void PeerMonitor::lost(const PeerFailure& failure) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_) return;
  failure_ = failure;
  failed_.notify_all();
  // Under the lock, so a Guard cannot go away while its abort runs. An abort only flags a Gloo buffer.
  for (auto& abort : aborts_) abort();
}

PeerMonitor::Guard::Guard(PeerMonitor& monitor, std::function<void()> abort) : monitor_(monitor) {
  std::lock_guard<std::mutex> lock(monitor_.mutex_);
  entry_ = monitor_.aborts_.insert(monitor_.aborts_.end(), std::move(abort));
  if (monitor_.failure_) (*entry_)();  // the wait about to start returns at once
}

PeerMonitor::Guard::~Guard() {
  std::lock_guard<std::mutex> lock(monitor_.mutex_);
  monitor_.aborts_.erase(entry_);
}

void PeerMonitor::run() {
  std::vector<pollfd> fds;
  std::vector<Peer*> polled;
  auto next_beat = Clock::now();
  while (!stop_) {
    fds.assign(1, pollfd{wake_[0], POLLIN, 0});
    polled.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Peer& p : peers_)
        if (!p.gone) {
          fds.push_back(pollfd{p.fd, POLLIN, 0});
          polled.push_back(&p);
        }
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - Clock::now()).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait, 0)));
    if (stop_) break;
    if (fds[0].revents != 0) {
      char drained[16];
      while (::read(wake_[0], drained, sizeof drained) > 0) {
      }
    }
    if (announcing_.exchange(false)) send_announcement();
    if (sharing_.exchange(false)) send_note();
    const auto now = Clock::now();
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents != 0) read_from(*polled[i - 1], now);
    if (now >= next_beat) {
      for (Peer* p : polled)
        if (!p->gone) (void)::send(p->fd, &kHeartbeat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      next_beat = now + interval_;
    }
    for (Peer* p : polled) {
      if (p->gone || now - p->last_heard <= timeout_) continue;
      lost({p->rank, concat("rank ", p->rank, " stopped responding (no heartbeat for ",
                            seconds_text(now - p->last_heard), " s)")});
      std::lock_guard<std::mutex> lock(mutex_);
      p->gone = true;
    }
  }
}

void PeerMonitor::read_from(Peer& peer, Clock::time_point now) {
  bool closed = false;
  char buffer[256];
  for (;;) {
    ssize_t got = ::recv(peer.fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (got > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      peer.last_heard = now;
      peer.inbox.append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    closed = !(got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    break;
  }
  size_t used = 0;
  std::optional<PeerFailure> failure;
  bool left = false;
  while (used < peer.inbox.size() && !left) {
    char kind = peer.inbox[used];
    if (kind == kGoodbye) {
      left = true;
    } else if (kind == kNote) {
      if (peer.inbox.size() - used < 5) break;
      uint32_t length = 0;
      std::memcpy(&length, peer.inbox.data() + used + 1, sizeof length);
      length = ntohl(length);
      if (length > kMaxNote) {  // not what a monitor sends: drop what came
        peer.inbox.clear();
        used = 0;
        break;
      }
      if (peer.inbox.size() - used < 5u + length) break;
      std::lock_guard<std::mutex> lock(mutex_);
      notes_[peer.rank] = peer.inbox.substr(used + 5, length);
      used += 4 + length;
    } else if (kind == kLeavingBecause || kind == kLeavingBecauseOfInput) {
      if (peer.inbox.size() - used < 7) break;
      uint32_t blamed = 0;
      uint16_t length = 0;
      std::memcpy(&blamed, peer.inbox.data() + used + 1, sizeof blamed);
      std::memcpy(&length, peer.inbox.data() + used + 5, sizeof length);
      blamed = ntohl(blamed);
      length = ntohs(length);
      if (peer.inbox.size() - used < 7u + length) break;
      std::string reason = peer.inbox.substr(used + 7, length);
      if (static_cast<int>(blamed) != peer.rank)
        reason = concat(reason, " (reported by rank ", peer.rank, ", which is leaving because of it)");
      failure = PeerFailure{static_cast<int>(blamed), reason, kind == kLeavingBecauseOfInput};
      left = true;
      used += 6 + length;
    }
    ++used;
  }
  peer.inbox.erase(0, used);
  if (!left && closed)
    failure = PeerFailure{peer.rank, concat("peer rank ", peer.rank,
                                            " closed the connection (its process exited or was killed)")};
  if (failure) lost(*failure);
  if (left || closed) {
    std::lock_guard<std::mutex> lock(mutex_);
    peer.gone = true;
    ::close(peer.fd);  // lets a leaving peer's goodbye handshake end
    peer.fd = -1;
  }
}

// Says goodbye (or which rank this one leaves because of) and waits briefly for each peer to acknowledge by
// closing its end, so the message is read before the connection goes (closing with unread bytes would reset it).
// A rank unwinding an exception of its own says nothing: the peers see the connection close and name this rank.
void PeerMonitor::leave() {
  std::vector<int> open;
  for (Peer& p : peers_) {
    // A lost peer (the one blamed included, when a Gloo wait found it) will not acknowledge anything.
    const bool lost = p.gone || (failure_ && failure_->rank == p.rank);
    if (p.fd >= 0 && lost) ::close(p.fd);
    if (p.fd >= 0 && !lost) open.push_back(p.fd);
  }
  const bool unwinding = std::uncaught_exceptions() > 0;
  if (!failure_ && unwinding) {
    for (int fd : open) ::close(fd);
    return;
  }
  const std::string message = failure_ ? failure_message(*failure_) : std::string(1, kGoodbye);
  for (int fd : open) {
    (void)::send(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
  }
  const auto deadline = Clock::now() + std::min<Clock::duration>(timeout_, std::chrono::seconds(2));
  std::vector<int> waiting = open;
  char buffer[256];
  while (!waiting.empty()) {
    std::vector<pollfd> fds;
    for (int fd : waiting) fds.push_back(pollfd{fd, POLLIN, 0});
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 || ::poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0) break;
    std::vector<int> still;
    for (const pollfd& p : fds) {
      ssize_t got = p.revents != 0 ? ::recv(p.fd, buffer, sizeof buffer, MSG_DONTWAIT) : -1;
      bool done = p.revents != 0 && (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR));
      if (!done) still.push_back(p.fd);
    }
    waiting = std::move(still);
  }
  for (int fd : open) ::close(fd);
}

}  // namespace dualpipe::comm
