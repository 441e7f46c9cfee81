// Rendezvous address checks of the launcher (see rendezvous.h).
#include "dualpipe/launch/rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>

#include "dualpipe/util/error.h"

namespace dualpipe::launch {
namespace {

using AddressList = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

AddressList resolve(const std::string& address, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found);
  DUALPIPE_REQUIRE(rc == 0, "--master-addr '", address, "' does not resolve: ", gai_strerror(rc));
  return AddressList(found, freeaddrinfo);
}

// Binds `port` (0: any) on the first address of `address` that takes it; returns the bound port, or 0 with
// errno set by the last failed bind.
int try_bind(const std::string& address, int port) {
  const AddressList addresses = resolve(address, port);
  int error = EADDRNOTAVAIL;
  for (const addrinfo* a = addresses.get(); a; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    // As the store will: a port held only by connections of an earlier run (TIME_WAIT) counts as free.
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    int result = 0;
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      result = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                                 : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    } else {
      error = errno;
    }
    close(fd);
    if (result != 0) return result;
  }
  errno = error;
  return 0;
}

}  // namespace

int pick_free_port(const std::string& address) {
  int ephemeral_low = 32768;  // Linux's default, when the system's setting cannot be read
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const int first = std::max(1024, ephemeral_low - 12768), count = ephemeral_low - first;
  if (count > 0) {
    const int start = static_cast<int>(std::random_device{}() % static_cast<unsigned>(count));
    for (int i = 0; i < count; ++i) {
      const int port = first + (start + i) % count;
      if (try_bind(address, port) != 0) return port;
      if (errno != EADDRINUSE) break;  // the address itself is the problem: named below
    }
  }
  const int port = try_bind(address, 0);
  DUALPIPE_REQUIRE(port != 0, "cannot pick a free port on --master-addr ", address, " (", std::strerror(errno),
                   "): rank 0 runs here, so it must be an address of this machine; or pass --master-port");
  return port;
}

void check_master_address(const std::string& address, int port, bool runs_rank0) {
  DUALPIPE_REQUIRE(!address.empty(), "--master-addr must not be empty");
  if (!runs_rank0) {
    resolve(address, port);
    return;
  }
  if (try_bind(address, port) != 0) return;
  const int error = errno;
  DUALPIPE_REQUIRE(error != EADDRINUSE, "--master-port ", port, " is already taken on this machine (",
                   std::strerror(error), "): rank 0's rendezvous store listens there; choose another port, or "
                   "stop what holds it (ss -ltnp 'sport = :", port, "')");
  DUALPIPE_REQUIRE(error != EADDRNOTAVAIL, "--master-addr ", address, " is not an address of this machine, "
                   "but this node (--node-rank 0) runs rank 0, whose rendezvous store listens there");
  DUALPIPE_REQUIRE(false, "cannot listen on --master-addr ", address, " --master-port ", port, ": ",
                   std::strerror(error));
}

}  // namespace dualpipe::launch
