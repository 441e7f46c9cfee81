// Rank processes on this machine, started the way torchrun starts them: RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
// MASTER_PORT (a free local port) and OMP_NUM_THREADS=1 in each one's environment. Shared by the multi-process
// runtime tests and the runtime benchmarks (bench/rank_processes.h). Header-only, no LibTorch.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace dualpipe::testing {

// A TCP port of the loopback interface that was free a moment ago (bound, read back, released).
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

// This process's environment with the variables above replaced by those of rank `rank` of `world_size`.
inline std::vector<std::string> rank_environment(int rank, int world_size, int port) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string s = *e;
    bool ours = false;
    for (const char* key : {"RANK=", "WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=", "OMP_NUM_THREADS="})
      ours = ours || s.rfind(key, 0) == 0;
    if (!ours) env.push_back(s);
  }
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(world_size));
  env.push_back("MASTER_ADDR=127.0.0.1");
  env.push_back("MASTER_PORT=" + std::to_string(port));
  env.push_back("OMP_NUM_THREADS=1");
  return env;
}

// Starts `program args...` with environment `env`, its stderr into the file `stderr_path` unless that is empty.
// Throws std::runtime_error when it cannot be started.
inline pid_t spawn_process(const std::string& program, const std::vector<std::string>& args,
                           std::vector<std::string> env, const std::string& stderr_path = "") {
  std::vector<std::string> argv_strings{program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  if (!stderr_path.empty())
    posix_spawn_file_actions_addopen(&files, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, program.c_str(), &files, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0) throw std::runtime_error("posix_spawn of '" + program + "' failed: error " + std::to_string(rc));
  return pid;
}

// The exit code of a waitpid status: the exit status, or 128 + the signal that ended the process.
inline int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Runs `ranks` copies of `program args...` as the ranks of one job and waits for them. Returns their exit codes,
// -1 for a rank still running after `limit`, which is then killed: a hang never leaves processes behind.
// Throws std::runtime_error (after killing the ranks already started) when one cannot be started.
inline std::vector<int> run_rank_processes(const std::string& program, int ranks, const std::vector<std::string>& args,
                                           std::chrono::seconds limit) {
  const int port = free_local_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    try {
      pids.push_back(spawn_process(program, args, rank_environment(r, ranks, port)));
    } catch (...) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw;
    }
  }
  constexpr int kRunning = -2;
  std::vector<int> codes(ranks, kRunning);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int running = ranks;
  while (running > 0) {
    for (int r = 0; r < ranks; ++r) {
      int status = 0;
      if (codes[r] != kRunning || ::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      codes[r] = exit_code(status);
      --running;
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < ranks; ++r)
        if (codes[r] == kRunning) {
          ::kill(pids[r], SIGKILL);
          ::waitpid(pids[r], nullptr, 0);
          codes[r] = -1;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return codes;
}

}  // namespace dualpipe::testing
