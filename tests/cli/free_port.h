// A TCP port for the rendezvous store of a test's ranks.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace dualpipe::test {

inline bool port_is_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return bound;
}

// A port that is free now, from 20000 to 31999: below Linux's ephemeral range (32768 and up), so that no outgoing
// connection of a test running beside this one takes it before the rank binds it (a port drawn from that range
// once was). Different `salt`s give different ports within one test process; the process id spreads the tests.
inline std::string a_free_port(int salt) {
  constexpr int kFirst = 20000, kCount = 12000;
  const int start = static_cast<int>((static_cast<long>(::getpid()) * 7 + salt * 101) % kCount);
  for (int i = 0; i < kCount; ++i) {
    const int port = kFirst + (start + i) % kCount;
    if (port_is_free(port)) return std::to_string(port);
  }
  return std::to_string(kFirst + start);  // none free: the test fails naming the port
}

}  // namespace dualpipe::test
