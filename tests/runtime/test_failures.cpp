// Issue 4, item 4: a rank that dies or stops responding in the middle of a step makes every other rank fail
// within the timeout, with an error naming it; no process is left; checkpoints written through the atomic
// writer are complete or absent, never partial. Four runtime_failure_worker processes over Gloo/TCP.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/support/rank_processes.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Rank {
  pid_t pid = -1;
  bool exited = false;         // reaped
  int code = -1;               // exit status, or 128 + signal
  bool stopped = false;        // seen stopped (SIGSTOP)
  Clock::time_point event;     // when the exit (or the stop) was seen
  std::string stderr_path;
};

// Four worker processes with their stderr in files; whatever is still running at the end is killed and reaped.
class Workers {
 public:
  Workers(int ranks, const std::vector<std::string>& args, const std::string& dir) {
    const int port = dualpipe::testing::free_local_port();
    try {
      for (int r = 0; r < ranks; ++r) {
        Rank rank;
        rank.stderr_path = dir + "/rank" + std::to_string(r) + ".err";
        rank.pid = dualpipe::testing::spawn_process(DUALPIPE_FAILURE_WORKER, args,
                                                    dualpipe::testing::rank_environment(r, ranks, port),
                                                    rank.stderr_path);
        ranks_.push_back(rank);
      }
    } catch (...) {
      kill_all();  // the destructor does not run when the constructor throws
      throw;
    }
  }
  ~Workers() { kill_all(); }

  // Polls every 10 ms until `done()` or the limit; records exits and stops.
  template <typename Done>
  bool watch(std::chrono::seconds limit, Done done) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      for (Rank& r : ranks_) {
        if (r.exited) continue;
        int status = 0;
        pid_t got = ::waitpid(r.pid, &status, WNOHANG | WUNTRACED);
        if (got != r.pid) continue;
        if (WIFSTOPPED(status)) {
          if (!r.stopped) r.event = Clock::now();
          r.stopped = true;
        } else {
          r.exited = true;
          r.code = dualpipe::testing::exit_code(status);
          r.event = Clock::now();
        }
      }
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  bool all_exited_except(int skip) const {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r)
      if (r != skip && !ranks_[r].exited) return false;
    return true;
  }
  void kill_all() {
    for (Rank& r : ranks_)
      if (!r.exited && r.pid > 0) {  // never kill(-1, ...): that would signal every process of the user
        ::kill(r.pid, SIGKILL);
        int status = 0;
        ::waitpid(r.pid, &status, 0);
        r.exited = true;
        r.code = 128 + SIGKILL;
      }
  }
  const Rank& operator[](int r) const { return ranks_[r]; }
  int size() const { return static_cast<int>(ranks_.size()); }

 private:
  std::vector<Rank> ranks_;
};

// A fresh directory for one test's files, removed with everything in it when the test ends.
struct ScratchDir {
  ScratchDir() {
    std::string pattern = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : "/tmp") + "/dpfail.XXXXXX";
    const char* dir = ::mkdtemp(pattern.data());
    if (dir == nullptr) throw std::runtime_error("mkdtemp failed");
    path = dir;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string path;
};

void expect_no_process_left(const Workers& w) {
  for (int r = 0; r < w.size(); ++r) {
    errno = 0;
    EXPECT_EQ(::kill(w[r].pid, 0), -1) << "rank " << r << " (pid " << w[r].pid << ") is still there";
    EXPECT_EQ(errno, ESRCH) << "rank " << r;
  }
}

// A checkpoint is either absent or complete ("end N" after N values); returns its step, -1 when absent.
int checkpoint_step(const std::string& path) {
  std::ifstream in(path);
  if (!in) return -1;
  std::string header, line;
  std::getline(in, header);
  std::smatch match;
  EXPECT_TRUE(std::regex_match(header, match, std::regex("dualpipe-test-checkpoint rank \\d+ step (\\d+)")))
      << path << " starts with '" << header << "'";
  int step = match.empty() ? -2 : std::stoi(match[1]);
  long values = 0;
  bool ended = false;
  while (std::getline(in, line)) {
    if (line.rfind("end ", 0) == 0) {
      EXPECT_EQ(std::stol(line.substr(4)), values) << path;
      ended = true;
      break;
    }
    ++values;
  }
  EXPECT_TRUE(ended) << path << " is partial: " << values << " values and no end line";
  return step;
}

// Checks the surviving ranks: non-zero exit within `limit` of the fault, stderr naming the faulty rank.
void expect_others_failed(const Workers& w, int faulty, Clock::time_point fault, std::chrono::milliseconds limit,
                          const std::regex& blame) {
  for (int r = 0; r < w.size(); ++r) {
    if (r == faulty) continue;
    const std::string err = read_text(w[r].stderr_path);
    EXPECT_TRUE(w[r].exited) << "rank " << r << " did not exit";
    EXPECT_EQ(w[r].code, 1) << "rank " << r << " stderr: " << err;
    auto after = std::chrono::duration_cast<std::chrono::milliseconds>(w[r].event - fault);
    EXPECT_LE(after.count(), limit.count()) << "rank " << r << " exited " << after.count() << " ms after the fault";
    std::cerr << "rank " << r << " exited " << after.count() << " ms after the fault: " << err;
    EXPECT_TRUE(std::regex_search(err, blame)) << "rank " << r << " does not name rank " << faulty << ": " << err;
  }
}

// The worker's options for `steps` DualPipe steps over 4 ranks, its files in `dir`, where rank `rank` meets `fault`
// in step `step` (what the worker does: kill, stop, kill-while-writing), after any `more` options.
std::vector<std::string> faulty_run(int steps, int timeout_ms, const std::string& dir, const std::string& fault,
                                    int rank, int step, const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = {"--kind", "dualpipe", "--steps", std::to_string(steps), "--timeout-ms",
                                   std::to_string(timeout_ms), "--out", dir, "--fault", fault, "--fault-rank",
                                   std::to_string(rank), "--fault-step", std::to_string(step)};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Once every rank exited: rank `killed` died of SIGKILL, each other rank failed within 5 s naming it as the peer that
// closed its connection, and no process is left.
void expect_killed_rank_named_by_the_others(Workers& w, int killed) {
  ASSERT_TRUE(w.watch(std::chrono::seconds(60), [&] { return w.all_exited_except(-1); }));
  ASSERT_EQ(w[killed].code, 128 + SIGKILL) << read_text(w[killed].stderr_path);
  expect_others_failed(w, killed, w[killed].event, std::chrono::milliseconds(5000),
                       std::regex("peer rank " + std::to_string(killed) + " closed the connection"));
  expect_no_process_left(w);
}

TEST(Failures, RankKilledMidStepFailsEveryOtherRankNamingIt) {
  const ScratchDir scratch;
  const std::string& dir = scratch.path;
  // A long timeout: the others must notice the closed connections, not wait for the timeout.
  Workers w(4, faulty_run(5, 20000, dir, "kill", 2, 2, {"--fault-after-forwards", "3"}), dir);
  ASSERT_NO_FATAL_FAILURE(expect_killed_rank_named_by_the_others(w, 2));
  for (int r = 0; r < 4; ++r)  // steps 0 and 1 completed everywhere, step 2 nowhere
    EXPECT_EQ(checkpoint_step(dir + "/rank" + std::to_string(r) + ".ckpt"), 1) << "rank " << r;
}

TEST(Failures, StoppedRankTimesOutEveryOtherRankNamingIt) {
  const ScratchDir scratch;
  const std::string& dir = scratch.path;
  Workers w(4, faulty_run(5, 3000, dir, "stop", 2, 2, {"--fault-after-forwards", "3"}), dir);
  bool ended = w.watch(std::chrono::seconds(60), [&] { return w[2].stopped && w.all_exited_except(2); });
  ASSERT_TRUE(w[2].stopped) << "rank 2 never stopped: " << read_text(w[2].stderr_path);
  EXPECT_TRUE(ended) << "the other ranks still run after 60 s";
  // Timeout 3 s, plus the heartbeat interval, plus slack for a loaded machine.
  expect_others_failed(w, 2, w[2].event, std::chrono::milliseconds(3000 + 3000),
                       std::regex("rank 2 stopped responding|rank 2 did not answer"));
  w.kill_all();
  expect_no_process_left(w);
}

TEST(Failures, RankKilledWhileWritingLeavesItsPreviousCheckpoint) {
  const ScratchDir scratch;
  const std::string& dir = scratch.path;
  Workers w(4, faulty_run(4, 20000, dir, "kill-while-writing", 1, 1), dir);
  ASSERT_NO_FATAL_FAILURE(expect_killed_rank_named_by_the_others(w, 1));
  // The half-written file exists under its temporary name only; the real name still holds step 0, complete.
  EXPECT_EQ(checkpoint_step(dir + "/rank1.ckpt"), 0);
  bool temporary_left = false;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) temporary_left = temporary_left || std::string(e->d_name).rfind("rank1.ckpt.tmp.", 0) == 0;
    ::closedir(d);
  }
  EXPECT_TRUE(temporary_left) << "the worker was meant to die half-way through a write";
  // The others wrote step 0, and step 1 unless rank 1's death cut their replica reduction of step 1 short;
  // whatever they have is complete (checkpoint_step checks), and none got past step 1.
  for (int r : {0, 2, 3}) {
    int step = checkpoint_step(dir + "/rank" + std::to_string(r) + ".ckpt");
    EXPECT_TRUE(step == 0 || step == 1) << "rank " << r << " step " << step;
  }
}

// Under `dualpipe launch`: the launcher sees rank 2 killed, stops the others, exits 1 naming rank 2, and leaves
// no process behind (the ranks' own errors are checked above, where nothing stops them first).
TEST(Failures, RankKilledUnderLaunchStopsTheJob) {
  const ScratchDir scratch;
  const std::string& dir = scratch.path;
  const std::string output = dir + "/launch.out";
  std::vector<std::string> args{DUALPIPE_BIN, "launch", "--nproc", "4", "--timeout-grace", "2", "--",
                                DUALPIPE_FAILURE_WORKER};
  for (const std::string& a : faulty_run(5, 20000, dir, "kill", 2, 2, {"--fault-after-forwards", "3"}))
    args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  pid_t launcher = -1;
  ASSERT_EQ(::posix_spawn(&launcher, DUALPIPE_BIN, &files, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&files);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (::waitpid(launcher, &status, WNOHANG) != launcher) {
    if (Clock::now() > deadline) {
      ::kill(launcher, SIGKILL);
      ::waitpid(launcher, &status, 0);
      FAIL() << "dualpipe launch still runs after 60 s: " << read_text(output);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string text = read_text(output);
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 1) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("rank 2[^\n]*(signal 9|SIGKILL)"))) << text;
  for (int r = 0; r < 4; ++r) {
    std::string pid_text = read_text(dir + "/rank" + std::to_string(r) + ".pid");
    ASSERT_FALSE(pid_text.empty()) << "rank " << r << " never started: " << text;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    ASSERT_GT(pid, 0);
    errno = 0;
    EXPECT_EQ(::kill(pid, 0), -1) << "rank " << r << " (pid " << pid << ") is still there";
    EXPECT_EQ(errno, ESRCH) << "rank " << r;
  }
}

}  // namespace
