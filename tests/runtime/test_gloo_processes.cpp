// Issue 3, item 6 over real processes: R = 4 ranks of runtime_gloo_worker talk over Gloo/TCP for DualPipe and
// DualPipeV, each checking its step against its own single-process reference. Workers that do not finish in
// time are killed, so a hang fails the test and never leaves processes behind.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Launches `ranks` workers and returns their exit codes (-1 for a worker killed at the deadline).
std::vector<int> run_workers(int ranks, const std::vector<std::string>& worker_args, std::chrono::seconds limit) {
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      std::string s = *e;
      for (const char* key : {"RANK=", "WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT="})
        if (s.rfind(key, 0) == 0) s.clear();
      if (!s.empty()) env_strings.push_back(s);
    }
    env_strings.push_back("RANK=" + std::to_string(r));
    env_strings.push_back("WORLD_SIZE=" + std::to_string(ranks));
    env_strings.push_back("MASTER_ADDR=127.0.0.1");
    env_strings.push_back("MASTER_PORT=" + std::to_string(port));
    env_strings.push_back("OMP_NUM_THREADS=1");
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> arg_strings{DUALPIPE_GLOO_WORKER};
    arg_strings.insert(arg_strings.end(), worker_args.begin(), worker_args.end());
    std::vector<char*> argv;
    for (auto& s : arg_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    int rc = ::posix_spawn(&pid, DUALPIPE_GLOO_WORKER, nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      ADD_FAILURE() << "posix_spawn failed: " << rc;
      return {};
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(ranks, -2);
  auto deadline = std::chrono::steady_clock::now() + limit;
  int running = ranks;
  while (running > 0) {
    for (int r = 0; r < ranks; ++r) {
      if (codes[r] != -2) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --running;
      }
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < ranks; ++r)
        if (codes[r] == -2) {
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

void expect_all_pass(const std::vector<std::string>& args) {
  auto codes = run_workers(4, args, std::chrono::seconds(90));
  ASSERT_EQ(codes.size(), 4u);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << (codes[r] == -1 ? " hung and was killed" : " reported a mismatch or error");
}

TEST(GlooProcesses, DualPipeFourRanks) { expect_all_pass({"dualpipe"}); }
TEST(GlooProcesses, DualPipeVFourRanks) { expect_all_pass({"dualpipev"}); }
TEST(GlooProcesses, DualPipeFourRanksForwardOnly) { expect_all_pass({"dualpipe", "forward-only"}); }

}  // namespace
