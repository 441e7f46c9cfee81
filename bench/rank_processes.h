// Multi-process benchmarks run their own ranks: the program started by the user spawns R copies of itself with
// torchrun-style RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (a free local port) and waits for them; each copy
// sees RANK set and runs one rank. Ranks that outlive the limit are killed, so a hang never leaves processes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace dualpipe::bench {

inline bool is_rank_process() { return std::getenv("RANK") != nullptr; }

inline int free_local_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Runs `ranks` copies of /proc/self/exe with `args`; returns 0 when all exit 0, else the first failure's status.
inline int run_rank_processes(int ranks, const std::vector<std::string>& args, std::chrono::seconds limit) {
  const int port = free_local_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string s = *e;
      bool ours = false;
      for (const char* key : {"RANK=", "WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=", "OMP_NUM_THREADS="})
        ours = ours || s.rfind(key, 0) == 0;
      if (!ours) env.push_back(s);
    }
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(ranks));
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    env.push_back("OMP_NUM_THREADS=1");
    std::vector<std::string> argv_strings{"/proc/self/exe"};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    if (::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) != 0) {
      std::fprintf(stderr, "posix_spawn failed\n");
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      return 1;
    }
    pids.push_back(pid);
  }
  int result = 0, running = ranks;
  std::vector<bool> done(ranks, false);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (running > 0) {
    for (int r = 0; r < ranks; ++r) {
      int status = 0;
      if (done[r] || ::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --running;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code != 0 && result == 0) result = code;
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "ranks still running after %lld s: killed\n", static_cast<long long>(limit.count()));
      for (int r = 0; r < ranks; ++r)
        if (!done[r]) {
          ::kill(pids[r], SIGKILL);
          ::waitpid(pids[r], nullptr, 0);
        }
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return result;
}

// Median and 90th percentile of a sample (sorted copy).
struct Summary {
  double median = 0, p90 = 0, min = 0;
};
inline Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.p90 = v[std::min(v.size() - 1, static_cast<size_t>(0.9 * static_cast<double>(v.size())))];
  return s;
}

}  // namespace dualpipe::bench
