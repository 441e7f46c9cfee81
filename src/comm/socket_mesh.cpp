#include "dualpipe/comm/socket_mesh.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cerrno>
#include <cstring>

#include "dualpipe/comm/communicator.h"

namespace dualpipe::comm {
namespace {

using Clock = std::chrono::steady_clock;
using dualpipe::detail::concat;

[[noreturn]] void fail(int rank, const std::string& what, const std::string& step) {
  throw CommError(concat("rank ", rank, ": ", what, ": ", step, ": ", std::strerror(errno)));
}

// The local IPv4 address the kernel would use to reach `master_addr` (a UDP connect sends nothing).
std::string local_address_towards(int rank, const std::string& master_addr, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(master_addr.c_str(), "9", &hints, &found) != 0 || found == nullptr)
    throw CommError(concat("rank ", rank, ": ", what, ": cannot resolve master address '", master_addr,
                           "' to an IPv4 address"));
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  int rc = fd < 0 ? -1 : ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (rc != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    if (fd >= 0) ::close(fd);
    fail(rank, what, concat("no route to master address '", master_addr, "'"));
  }
  ::close(fd);
  char text[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return text;
}

// Reads exactly n bytes from a blocking socket before `deadline`; false on EOF, error or deadline.
bool read_exact(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* bytes = static_cast<char*>(data);
  while (n > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    ssize_t got = ::recv(fd, bytes, n, 0);
    if (got <= 0) return false;
    bytes += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

std::vector<int> connect_socket_mesh(c10d::Store& store, const std::string& key_prefix, const std::string& master_addr,
                                     int rank, int world_size, std::chrono::milliseconds timeout,
                                     const std::string& what) {
  std::vector<int> sockets(static_cast<size_t>(world_size), -1);
  if (world_size <= 1) return sockets;
  const auto deadline = Clock::now() + timeout;
  const auto key_of = [&](int r) { return concat(key_prefix, "/", r); };
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) fail(rank, what, "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof address;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(listener, world_size) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(listener);
    fail(rank, what, "listen");
  }
  std::string published = concat(local_address_towards(rank, master_addr, what), ":", ntohs(address.sin_port));
  store.set(key_of(rank), std::vector<uint8_t>(published.begin(), published.end()));

  auto add_peer = [&](int peer, int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (peer < 0 || peer >= world_size || peer == rank || sockets[static_cast<size_t>(peer)] >= 0) {
      ::close(fd);
      throw CommError(concat("rank ", rank, ": ", what, ": a connection said it came from rank ", peer,
                             ", which is not a peer still expected"));
    }
    sockets[static_cast<size_t>(peer)] = fd;
  };
  try {
    for (int peer = 0; peer < rank; ++peer) {
      std::vector<uint8_t> value = store.get(key_of(peer));
      std::string text(value.begin(), value.end());
      size_t colon = text.rfind(':');
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(static_cast<uint16_t>(std::stoi(text.substr(colon + 1))));
      ::inet_pton(AF_INET, text.substr(0, colon).c_str(), &to.sin_addr);
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      uint32_t hello = htonl(static_cast<uint32_t>(rank));
      if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 ||
          ::send(fd, &hello, sizeof hello, MSG_NOSIGNAL) != sizeof hello) {
        if (fd >= 0) ::close(fd);
        fail(rank, what, concat("cannot connect to rank ", peer, " at ", text));
      }
      add_peer(peer, fd);
    }
    for (int accepted = 0; accepted < world_size - 1 - rank; ++accepted) {
      pollfd p{listener, POLLIN, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      const bool arriving = left > 0 && ::poll(&p, 1, static_cast<int>(left)) > 0;
      int fd = arriving ? ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC) : -1;
      uint32_t hello = 0;
      if (fd < 0 || !read_exact(fd, &hello, sizeof hello, deadline)) {
        if (fd >= 0) ::close(fd);
        throw CommError(concat("rank ", rank, ": ", what, ": ", world_size - 1 - rank - accepted,
                               " higher ranks did not connect within ", timeout.count(), " ms"));
      }
      add_peer(static_cast<int>(ntohl(hello)), fd);
    }
  } catch (...) {
    ::close(listener);
    for (int fd : sockets)
      if (fd >= 0) ::close(fd);
    throw;
  }
  ::close(listener);
  return sockets;
}

}  // namespace dualpipe::comm
