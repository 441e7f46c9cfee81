// The interface that routes to an address (see network_interface.h).
#include "dualpipe/comm/network_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace dualpipe::comm {
namespace {

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

// The source address the kernel picks for a datagram to `target`.
bool source_address_for(const addrinfo& target, sockaddr_storage& source) {
  const int fd = socket(target.ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  socklen_t length = sizeof source;
  const bool ok = connect(fd, target.ai_addr, target.ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&source), &length) == 0;
  close(fd);
  return ok;
}

}  // namespace

std::string interface_routing_to(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* targets = nullptr;
  // Any port: connect() on a datagram socket only chooses the route.
  if (getaddrinfo(address.c_str(), "9", &hints, &targets) != 0) return "";
  std::string name;
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) == 0) {
    for (const addrinfo* t = targets; t && name.empty(); t = t->ai_next) {
      sockaddr_storage source{};
      if (!source_address_for(*t, source)) continue;
      for (const ifaddrs* i = interfaces; i; i = i->ifa_next) {
        if ((i->ifa_flags & IFF_UP) && same_address(i->ifa_addr, reinterpret_cast<const sockaddr*>(&source))) {
          name = i->ifa_name;
          break;
        }
      }
    }
    freeifaddrs(interfaces);
  }
  freeaddrinfo(targets);
  return name;
}

}  // namespace dualpipe::comm
