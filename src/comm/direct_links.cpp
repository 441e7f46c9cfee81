#include "direct_links.h"

#include <ATen/ATen.h>
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "dualpipe/comm/peer_monitor.h"
#include "wait_error.h"

namespace dualpipe::comm {

using dualpipe::detail::concat;

namespace {

using Clock = std::chrono::steady_clock;

// A message's header on the wire, in network order.
struct WireHeader {
  uint32_t tag;
  uint32_t unused;
  uint64_t nbytes;
};
constexpr size_t kHeaderBytes = sizeof(WireHeader);
constexpr size_t kInboxBytes = 64 * 1024;  // read in slices this large; bigger payloads go straight to their tensor
constexpr int kMaxBatchedSends = 32;       // small sends queued together leave in one sendmsg

// One send or receive. A send's `moved` counts its header first, then its bytes; a receive's counts its bytes.
struct Transfer {
  at::Tensor tensor;  // holds the bytes until the transfer is done
  char* data = nullptr;
  size_t nbytes = 0;
  size_t moved = 0;
  WireHeader header{};
  bool done = false;
  std::string error;                  // why it failed, empty on success
  std::shared_ptr<Transfer> receive;  // an early message's receive, posted while its bytes still came in
};
using TransferPtr = std::shared_ptr<Transfer>;

// The messages to and from one peer.
struct Link {
  int fd = -1;
  std::string broken;  // why the link failed; empty while it works
  std::deque<TransferPtr> sends;                     // not yet written out, in order
  std::map<int, std::deque<TransferPtr>> posted;     // receives waiting for their message, by tag
  std::map<int, std::deque<TransferPtr>> early;      // messages that came before their receive, by tag
  std::vector<char> inbox = std::vector<char>(kInboxBytes);
  size_t inbox_begin = 0, inbox_end = 0;             // bytes read but not yet parsed
  TransferPtr reading;                               // the message whose bytes come next
};

void finish(Transfer& t, std::string error = {}) {
  t.done = true;
  t.error = std::move(error);
  t.tensor = at::Tensor();
}

// A message whose size is not its receive's fails that receive (the rank that posted it expected another shape).
void fail_wrong_size(Transfer& receive, size_t message_bytes) {
  finish(receive, concat("the message has ", message_bytes, " bytes, the receive buffer ", receive.nbytes));
}

void copy_early(Transfer& early, Transfer& receive) {
  if (early.nbytes != receive.nbytes) return fail_wrong_size(receive, early.nbytes);
  if (early.nbytes > 0) std::memcpy(receive.data, early.data, early.nbytes);
  finish(receive);
}

}  // namespace

struct DirectLinks::Engine {
  int rank;
  PeerMonitor* monitor;
  std::chrono::milliseconds timeout;
  std::vector<Link> links;  // by peer rank
  int wake[2] = {-1, -1};   // ends the polling thread's poll(): a send queued meanwhile, or an abort
  std::atomic<bool> aborted{false};
  std::optional<PeerMonitor::Guard> guard;

  std::mutex mutex;
  std::condition_variable pass_ended;
  bool polling = false;  // a thread is in poll(), the lock released
  std::vector<pollfd> polled;
  std::vector<int> polled_peers;

  void write_some(Link& link);
  void read_some(Link& link);
  void parse(Link& link);
  void start_message(Link& link, int tag, size_t nbytes);
  void end_message(Link& link);
  void break_link(Link& link, const std::string& why);
  void pass(std::unique_lock<std::mutex>& lock, int limit_ms);
  std::string wait(Transfer& t, std::chrono::milliseconds limit);
  void wake_poller() {
    char byte = 0;
    (void)!::write(wake[1], &byte, 1);
  }
};

// Writes what the socket takes of the queued sends, several small ones per call.
void DirectLinks::Engine::write_some(Link& link) {
  while (!link.sends.empty() && link.broken.empty()) {
    iovec parts[2 * kMaxBatchedSends];
    int count = 0;
    for (size_t i = 0; i < link.sends.size() && i < static_cast<size_t>(kMaxBatchedSends); ++i) {
      Transfer& t = *link.sends[i];
      if (t.moved < kHeaderBytes)
        parts[count++] = {reinterpret_cast<char*>(&t.header) + t.moved, kHeaderBytes - t.moved};
      const size_t sent = t.moved > kHeaderBytes ? t.moved - kHeaderBytes : 0;
      if (sent < t.nbytes) parts[count++] = {t.data + sent, t.nbytes - sent};
    }
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<size_t>(count);
    ssize_t wrote = ::sendmsg(link.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) break_link(link, std::strerror(errno));
      return;
    }
    size_t left = static_cast<size_t>(wrote), asked = 0;
    for (int i = 0; i < count; ++i) asked += parts[i].iov_len;
    while (!link.sends.empty()) {
      Transfer& t = *link.sends.front();
      const size_t take = std::min(left, kHeaderBytes + t.nbytes - t.moved);
      t.moved += take;
      left -= take;
      if (t.moved < kHeaderBytes + t.nbytes) break;
      finish(t);
      link.sends.pop_front();
    }
    if (static_cast<size_t>(wrote) < asked) return;  // the socket is full for now
  }
}

// Reads what the socket has and hands the bytes to their receives.
void DirectLinks::Engine::read_some(Link& link) {
  while (link.broken.empty()) {
    Transfer* direct = link.reading.get();
    const bool straight = direct != nullptr && link.inbox_begin == link.inbox_end &&
                          direct->nbytes - direct->moved >= kInboxBytes;
    if (!straight && link.inbox_begin == link.inbox_end) link.inbox_begin = link.inbox_end = 0;
    if (!straight && link.inbox_end == link.inbox.size()) {
      std::memmove(link.inbox.data(), link.inbox.data() + link.inbox_begin, link.inbox_end - link.inbox_begin);
      link.inbox_end -= link.inbox_begin;
      link.inbox_begin = 0;
    }
    char* into = straight ? direct->data + direct->moved : link.inbox.data() + link.inbox_end;
    const size_t room = straight ? direct->nbytes - direct->moved : link.inbox.size() - link.inbox_end;
    ssize_t got = ::recv(link.fd, into, room, MSG_DONTWAIT);
    if (got == 0) return break_link(link, "the peer closed the connection");
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) break_link(link, std::strerror(errno));
      return;
    }
    if (straight) {
      direct->moved += static_cast<size_t>(got);
      if (direct->moved == direct->nbytes) end_message(link);
    } else {
      link.inbox_end += static_cast<size_t>(got);
      parse(link);
    }
    if (static_cast<size_t>(got) < room) return;  // the socket is drained for now
  }
}

void DirectLinks::Engine::parse(Link& link) {
  while (link.inbox_begin < link.inbox_end) {
    const size_t available = link.inbox_end - link.inbox_begin;
    if (!link.reading) {
      if (available < kHeaderBytes) return;
      WireHeader header;
      std::memcpy(&header, link.inbox.data() + link.inbox_begin, kHeaderBytes);
      link.inbox_begin += kHeaderBytes;
      start_message(link, static_cast<int>(ntohl(header.tag)), static_cast<size_t>(be64toh(header.nbytes)));
      continue;
    }
    Transfer& t = *link.reading;
    const size_t take = std::min(available, t.nbytes - t.moved);
    std::memcpy(t.data + t.moved, link.inbox.data() + link.inbox_begin, take);
    t.moved += take;
    link.inbox_begin += take;
    if (t.moved == t.nbytes) end_message(link);
  }
}

// A header came: its bytes go to the first receive posted for its tag, or aside until one is posted.
void DirectLinks::Engine::start_message(Link& link, int tag, size_t nbytes) {
  auto posted = link.posted.find(tag);
  TransferPtr receive;
  if (posted != link.posted.end() && !posted->second.empty()) {
    receive = posted->second.front();
    posted->second.pop_front();
  }
  if (receive && receive->nbytes == nbytes) {
    link.reading = std::move(receive);
  } else {  // early, or of the wrong size: read aside (then copied, or dropped with the receive's error)
    auto aside = std::make_shared<Transfer>();
    aside->tensor = at::empty({static_cast<int64_t>(nbytes)}, at::kByte);
    aside->data = static_cast<char*>(aside->tensor.data_ptr());
    aside->nbytes = nbytes;
    if (receive)
      fail_wrong_size(*receive, nbytes);
    else
      link.early[tag].push_back(aside);
    link.reading = std::move(aside);
  }
  if (nbytes == 0) end_message(link);
}

void DirectLinks::Engine::end_message(Link& link) {
  TransferPtr t = std::move(link.reading);
  t->done = true;
  if (t->receive) copy_early(*t, *t->receive);
}

void DirectLinks::Engine::break_link(Link& link, const std::string& why) {
  link.broken = why;
  for (auto& t : link.sends) finish(*t, why);
  link.sends.clear();
  for (auto& [tag, queue] : link.posted)
    for (auto& t : queue) finish(*t, why);
  link.posted.clear();
  if (link.reading && !link.reading->done) {
    finish(*link.reading, why);
    if (link.reading->receive) finish(*link.reading->receive, why);
  }
  link.reading.reset();
}

// One polling pass: sleeps in poll() (the lock released) up to `limit_ms` until a link can be read, or written
// with sends queued, then reads and writes what the links allow.
void DirectLinks::Engine::pass(std::unique_lock<std::mutex>& lock, int limit_ms) {
  polled.assign(1, pollfd{wake[0], POLLIN, 0});
  polled_peers.assign(1, -1);
  for (size_t peer = 0; peer < links.size(); ++peer) {
    const Link& link = links[peer];
    if (link.fd < 0 || !link.broken.empty()) continue;
    polled.push_back(pollfd{link.fd, static_cast<short>(POLLIN | (link.sends.empty() ? 0 : POLLOUT)), 0});
    polled_peers.push_back(static_cast<int>(peer));
  }
  polling = true;
  lock.unlock();
  const int ready = ::poll(polled.data(), polled.size(), limit_ms);
  lock.lock();
  polling = false;
  if (ready > 0) {
    char drain[64];
    if (polled[0].revents != 0)
      while (::read(wake[0], drain, sizeof drain) > 0) {
      }
    for (size_t i = 1; i < polled.size(); ++i) {
      Link& link = links[static_cast<size_t>(polled_peers[i])];
      if (polled[i].revents & POLLOUT) write_some(link);
      if (polled[i].revents & (POLLIN | POLLHUP | POLLERR)) read_some(link);
    }
  }
  pass_ended.notify_all();
}

// Until `t` is done: polls the links itself, or waits for the thread that does. Returns the transfer's error,
// "aborted" when the peer monitor ended the waits, "Timed out" after `limit`.
std::string DirectLinks::Engine::wait(Transfer& t, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::unique_lock<std::mutex> lock(mutex);
  while (!t.done) {
    if (aborted) return "aborted";
    const auto now = Clock::now();
    if (now >= deadline) return "Timed out";
    const auto slice = std::min<Clock::duration>(deadline - now, std::chrono::seconds(1));
    if (polling) {
      pass_ended.wait_for(lock, slice);
      continue;
    }
    pass(lock, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(slice).count()));
  }
  return t.error;
}

namespace {

class DirectWork : public Work {
 public:
  DirectWork(std::shared_ptr<DirectLinks::Engine> engine, TransferPtr transfer, int peer, int tag, const char* what)
      : engine_(std::move(engine)), transfer_(std::move(transfer)), peer_(peer), tag_(tag), what_(what) {}

  void wait(std::chrono::milliseconds timeout) override {
    std::string error = engine_->wait(*transfer_, timeout);
    if (!error.empty())
      throw wait_error(engine_->monitor, engine_->rank, concat(what_, " rank ", peer_, " (tag ", tag_, ")"), peer_,
                       timeout, error);
  }

  // Lets the links move on (without sleeping) when no thread is polling them.
  bool is_completed() override {
    std::unique_lock<std::mutex> lock(engine_->mutex);
    if (!transfer_->done && !engine_->polling) engine_->pass(lock, 0);
    return transfer_->done;
  }

 private:
  std::shared_ptr<DirectLinks::Engine> engine_;
  TransferPtr transfer_;
  int peer_, tag_;
  const char* what_;
};

void check_peer(const DirectLinks::Engine& engine, int peer, const char* what) {
  DUALPIPE_REQUIRE(peer >= 0 && peer < static_cast<int>(engine.links.size()) && peer != engine.rank, "rank ",
                   engine.rank, " cannot ", what, " rank ", peer);
}

}  // namespace

DirectLinks::DirectLinks(std::vector<int> sockets, int rank, PeerMonitor* monitor, std::chrono::milliseconds timeout)
    : engine_(std::make_shared<Engine>()) {
  Engine& e = *engine_;
  e.rank = rank;
  e.monitor = monitor;
  e.timeout = timeout;
  e.links.resize(sockets.size());
  for (size_t peer = 0; peer < sockets.size(); ++peer) e.links[peer].fd = sockets[peer];
  if (::pipe2(e.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    for (int fd : sockets)
      if (fd >= 0) ::close(fd);
    throw CommError(concat("rank ", rank, ": direct links: pipe: ", std::strerror(errno)));
  }
  if (monitor) {
    // From the monitor's thread: no lock of ours is taken there (a waiter may be asking the monitor meanwhile).
    Engine* raw = engine_.get();
    e.guard.emplace(*monitor, [raw] {
      raw->aborted = true;
      raw->wake_poller();
      raw->pass_ended.notify_all();
    });
  }
}

// A Work may outlive the links: its wait then fails at once, and never polls a closed (maybe reused) descriptor.
DirectLinks::~DirectLinks() {
  Engine& e = *engine_;
  e.guard.reset();
  std::lock_guard<std::mutex> lock(e.mutex);
  e.monitor = nullptr;  // it may go with the communicator; a late wait's error is then worded without it
  for (Link& link : e.links) {
    if (link.fd < 0) continue;
    if (link.broken.empty()) e.break_link(link, "the communicator was destroyed");
    ::close(link.fd);
    link.fd = -1;
  }
  for (int& fd : e.wake) {
    ::close(fd);
    fd = -1;
  }
}

std::shared_ptr<Work> DirectLinks::isend(const at::Tensor& tensor, int dst, int tag) {
  Engine& e = *engine_;
  check_peer(e, dst, "send to");
  auto t = std::make_shared<Transfer>();
  t->tensor = tensor;
  t->data = static_cast<char*>(tensor.data_ptr());
  t->nbytes = tensor.nbytes();
  t->header = WireHeader{htonl(static_cast<uint32_t>(tag)), 0, htobe64(t->nbytes)};
  std::string broken;
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    Link& link = e.links[static_cast<size_t>(dst)];
    broken = link.broken;
    if (broken.empty()) {
      link.sends.push_back(t);
      if (link.sends.size() == 1) e.write_some(link);
      if (!link.sends.empty() && e.polling) e.wake_poller();  // its poll() does not watch this link for writing
    }
  }
  if (!broken.empty())  // worded outside the lock: the monitor may be asked, and waited for
    throw wait_error(e.monitor, e.rank, concat("send to rank ", dst, " (tag ", tag, ")"), dst, e.timeout, broken);
  return std::make_shared<DirectWork>(engine_, std::move(t), dst, tag, "send to");
}

std::shared_ptr<Work> DirectLinks::irecv(at::Tensor& tensor, int src, int tag) {
  Engine& e = *engine_;
  check_peer(e, src, "receive from");
  DUALPIPE_REQUIRE(tensor.is_contiguous(), "receive buffers must be contiguous");
  auto t = std::make_shared<Transfer>();
  t->tensor = tensor;
  t->data = static_cast<char*>(tensor.data_ptr());
  t->nbytes = tensor.nbytes();
  std::string broken;
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    Link& link = e.links[static_cast<size_t>(src)];
    auto early = link.early.find(tag);
    if (early != link.early.end() && !early->second.empty()) {
      TransferPtr came = early->second.front();
      early->second.pop_front();
      if (came->done)
        copy_early(*came, *t);
      else
        came->receive = t;  // copied when its last byte is in
    } else if (link.broken.empty()) {
      link.posted[tag].push_back(t);
    } else {
      broken = link.broken;
    }
  }
  if (!broken.empty())
    throw wait_error(e.monitor, e.rank, concat("receive from rank ", src, " (tag ", tag, ")"), src, e.timeout,
                     broken);
  return std::make_shared<DirectWork>(engine_, std::move(t), src, tag, "receive from");
}

}  // namespace dualpipe::comm
