// `dualpipe launch` as a user runs it: the ranks' environment, whole prefixed lines, stopping every process when
// one rank fails or the launcher is told to stop, and argument errors. Ranks are small /bin/sh programs; the
// reference is what they were told to print and the kernel's word on which processes still exist.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Launched {
  int status = -1;  // exit status; -signal when the launcher itself was killed by a signal
  std::string out;  // stdout and stderr together, as a terminal would show them
  double seconds = 0;
};

// Runs `dualpipe ARGS...` with stdout and stderr into one pipe (no shell, so ARGS need no quoting).
// `while_running` gets the launcher's pid once it started.
Launched dualpipe(const std::vector<std::string>& args, const std::function<void(pid_t)>& while_running = {}) {
  std::vector<std::string> argv_strings = {DUALPIPE_BIN};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  Launched run;
  int out[2];
  if (pipe(out) != 0) return run;
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    setenv("RANK", "99", 1);  // a stale value in the caller's environment must not reach the ranks
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  if (while_running) while_running(pid);
  char buffer[65536];
  ssize_t n;
  while ((n = read(out[0], buffer, sizeof buffer)) != 0) {
    if (n > 0) {
      run.out.append(buffer, static_cast<std::size_t>(n));
    } else if (errno != EINTR) {
      break;
    }
  }
  close(out[0]);
  int raw = 0;
  waitpid(pid, &raw, 0);
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -WTERMSIG(raw);
  return run;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  const auto lines = lines_of(text);
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

// A fresh directory the ranks write their pids to; removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dualpipe-launch-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

  // Every pid the ranks wrote (files "pid.*"), read after the launcher returned.
  std::vector<pid_t> pids() const {
    std::vector<pid_t> pids;
    for (const auto& entry : fs::directory_iterator(path_)) {
      std::ifstream in(entry.path());
      pid_t pid = 0;
      if (entry.path().filename().string().rfind("pid.", 0) == 0 && in >> pid) pids.push_back(pid);
    }
    return pids;
  }

 private:
  std::string path_;
};

// Shell text that waits until `n` files pid.* exist in `dir`: every rank has started and written its pids.
std::string wait_for_pid_files(const std::string& dir, int n) {
  return "while [ $(ls '" + dir + "' | grep -c '^pid\\.') -lt " + std::to_string(n) + " ]; do sleep 0.02; done; ";
}

// Shell text: record the shell's pid, as a rank that is itself the process to watch.
std::string record_shell_pid(const std::string& dir) { return "echo $$ > '" + dir + "'/pid.sh.$RANK; "; }

// Shell text: start `sleep 60` in the background, record its pid and the shell's, then wait for it. The sleep is
// a grandchild of the launcher, so its death shows that whole process groups were stopped.
std::string record_pids_and_sleep(const std::string& dir) {
  return record_shell_pid(dir) + "sleep 60 & echo $! > '" + dir + "'/pid.sleep.$RANK; wait";
}

// `dualpipe launch --nproc N [OPTIONS] -- /bin/sh -c PROGRAM`: `nproc` ranks each running the shell text `program`.
Launched launch_shells(int nproc, const std::string& program, const std::vector<std::string>& options = {},
                       const std::function<void(pid_t)>& while_running = {}) {
  std::vector<std::string> args = {"launch", "--nproc", std::to_string(nproc)};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), {"--", "/bin/sh", "-c", program});
  return dualpipe(args, while_running);
}

// Waits up to 5 s for the ranks to write `n` pid files into `dir`; returns the pids written by then.
std::vector<pid_t> wait_for_pids(const TempDir& dir, std::size_t n) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (dir.pids().size() < n && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return dir.pids();
}

void expect_all_gone(const std::vector<pid_t>& pids, std::size_t expected_count) {
  EXPECT_EQ(pids.size(), expected_count);
  for (pid_t pid : pids) {
    errno = 0;
    EXPECT_TRUE(kill(pid, 0) == -1 && errno == ESRCH) << "process " << pid << " was left behind";
  }
}

// The launcher exited 1 printing each of `lines` (after its "dualpipe launch: " prefix) on a line of its own, and
// none of the `processes` pids the ranks recorded in `dir` runs any more.
void expect_job_failed_saying(const Launched& run, const std::vector<std::string>& lines, const TempDir& dir,
                              std::size_t processes) {
  EXPECT_EQ(run.status, 1) << run.out;
  for (const std::string& line : lines) EXPECT_TRUE(has_line(run.out, "dualpipe launch: " + line)) << run.out;
  expect_all_gone(dir.pids(), processes);
}

TEST(Launch, EveryRankGetsItsEnvironmentAndRankPrefix) {
  const Launched run = launch_shells(4,
                                     "echo \"RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK "
                                     "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR "
                                     "MASTER_PORT=$MASTER_PORT\"; echo \"on stderr\" >&2");
  ASSERT_EQ(run.status, 0) << run.out;

  std::smatch banner;
  const std::regex banner_form("dualpipe launch: 4 ranks, MASTER_ADDR=127\\.0\\.0\\.1, MASTER_PORT=(\\d+)");
  ASSERT_TRUE(std::regex_search(run.out, banner, banner_form))
      << run.out;
  const std::string port = banner[1];
  EXPECT_GT(std::stoi(port), 0);
  EXPECT_LE(std::stoi(port), 65535);

  for (int r = 0; r < 4; ++r) {
    const std::string rank = std::to_string(r);
    EXPECT_TRUE(has_line(run.out, "[rank " + rank + "] RANK=" + rank + " WORLD_SIZE=4 LOCAL_RANK=" + rank +
                                      " LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port))
        << run.out;
    EXPECT_TRUE(has_line(run.out, "[rank " + rank + "] on stderr")) << run.out;
  }
  // Nothing but the banner and the ranks' 8 lines.
  EXPECT_EQ(lines_of(run.out).size(), 9u) << run.out;
}

TEST(Launch, GivenAddressAndPortReachTheRanksAndOptionsAfterProgramAreItsOwn) {
  // No "--": everything from PROGRAM on belongs to PROGRAM, even what looks like launch's own options.
  const Launched run = dualpipe({"launch", "--nproc", "2", "--master-addr", "localhost", "--master-port", "29555",
                                 "/bin/sh", "-c", "echo \"$MASTER_ADDR:$MASTER_PORT $0 $1\"", "--nproc", "--help"});
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(has_line(run.out, "dualpipe launch: 2 ranks, MASTER_ADDR=localhost, MASTER_PORT=29555")) << run.out;
  EXPECT_TRUE(has_line(run.out, "[rank 0] localhost:29555 --nproc --help")) << run.out;
  EXPECT_TRUE(has_line(run.out, "[rank 1] localhost:29555 --nproc --help")) << run.out;
}

TEST(Launch, LinesOfRanksNeverMixAndAnUnfinishedLastLineIsKept) {
  // Lines longer than PIPE_BUF (4096): even a single write of one is not atomic, so only the launcher's line
  // assembly keeps them whole. Odd lines also go to stderr, which shares the test's pipe.
  constexpr int kRanks = 4, kLines = 200, kWidth = 5000;
  const std::string program =
      "p=$(printf '%" + std::to_string(kWidth) + "s' '' | tr ' ' \"$RANK\"); i=0; while [ $i -lt " +
      std::to_string(kLines) + " ]; do echo \"O$RANK $i $p\"; " +
      "if [ $((i % 2)) -eq 1 ]; then echo \"E$RANK $i $p\" >&2; fi; i=$((i + 1)); done; printf \"tail of $RANK\"";
  const Launched run = launch_shells(kRanks, program);
  ASSERT_EQ(run.status, 0) << run.out.substr(0, 2000);

  const std::regex line_form("\\[rank (\\d)\\] ([OE])(\\d) (\\d+) (\\d+)");
  std::map<std::pair<int, char>, int> next;  // (rank, stream) -> next line number expected
  std::map<int, int> tails;
  for (const std::string& line : lines_of(run.out)) {
    if (line.rfind("dualpipe launch: ", 0) == 0) continue;
    if (line.size() == std::string("[rank 0] tail of 0").size() && line.find("] tail of ") != std::string::npos) {
      ASSERT_EQ(line[6], line.back()) << line;
      ++tails[line[6] - '0'];
      continue;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_form)) << "not one whole line of one rank: " << line.substr(0, 200);
    const int rank = std::stoi(m[1]);
    ASSERT_EQ(m[3], m[1]) << line.substr(0, 40);  // the prefix names the rank that wrote the line
    const std::string payload = m[5];
    ASSERT_EQ(payload, std::string(kWidth, static_cast<char>('0' + rank))) << line.substr(0, 40);
    int& expected = next[{rank, m[2].str()[0]}];
    ASSERT_EQ(std::stoi(m[4]), m[2] == "O" ? expected : 2 * expected + 1) << line.substr(0, 40);
    ++expected;
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ((next[{r, 'O'}]), kLines) << "rank " << r;
    EXPECT_EQ((next[{r, 'E'}]), kLines / 2) << "rank " << r;
    EXPECT_EQ(tails[r], 1) << "rank " << r;
  }
}

TEST(Launch, FailingRankStopsTheOthersAndLeavesNoProcess) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  // Every rank (rank 2 too) leaves a background sleep in its process group; rank 2 fails once all have started.
  const std::string program = "if [ \"$RANK\" = 2 ]; then sleep 60 & echo $! > '" + dir.path() +
                              "/pid.sleep.2'; echo $$ > '" + dir.path() + "/pid.sh.2'; " +
                              wait_for_pid_files(dir.path(), 8) + "exit 3; fi; " + record_pids_and_sleep(dir.path());
  const Launched run = launch_shells(4, program);
  EXPECT_NE(run.status, 0) << run.out;
  EXPECT_LT(run.seconds, 4.0) << run.out;  // SIGTERM suffices: no need for the 5 s grace
  expect_job_failed_saying(run, {"rank 2 exited with status 3; stopped the other 3 ranks"}, dir, 8);
}

TEST(Launch, RankKilledBySignalIsNamed) {
  TempDir dir;
  const std::string program = "if [ \"$RANK\" = 1 ]; then " + wait_for_pid_files(dir.path(), 2) +
                              "kill -9 $$; fi; " + record_pids_and_sleep(dir.path());
  const Launched run = launch_shells(2, program);
  EXPECT_LT(run.seconds, 4.0) << run.out;
  expect_job_failed_saying(run, {"rank 1 was killed by signal 9 (SIGKILL); stopped the other rank"}, dir, 2);
}

TEST(Launch, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  TempDir dir;
  // The ignored SIGTERM is inherited by the background sleep as well.
  const std::string program = "trap '' TERM; if [ \"$RANK\" = 0 ]; then " + wait_for_pid_files(dir.path(), 4) +
                              "exit 4; fi; " + record_pids_and_sleep(dir.path());
  const Launched run = launch_shells(3, program, {"--timeout-grace", "1"});
  EXPECT_GE(run.seconds, 1.0) << run.out;
  EXPECT_LT(run.seconds, 4.0) << run.out;
  expect_job_failed_saying(run,
                           {"rank 1 did not stop within 1 s of SIGTERM; sending SIGKILL",
                            "rank 2 did not stop within 1 s of SIGTERM; sending SIGKILL",
                            "rank 0 exited with status 4; stopped the other 2 ranks"},
                           dir, 4);
}

// Issue 10: rank 2 is stopped (SIGSTOP), the other ranks time out waiting for it and exit 1 naming it, as the
// communicators word it. The launcher must blame rank 2, not the first rank it reaped, and say that the others
// exited only because of it.
TEST(Launch, AStoppedRankIsBlamedAndTheRanksThatNamedItAreItsConsequences) {
  TempDir dir;
  const std::string program =
      record_shell_pid(dir.path()) + wait_for_pid_files(dir.path(), 4) +
      "if [ \"$RANK\" = 2 ]; then kill -STOP $$; fi; "
      "echo \"rank $RANK: waiting for 2SEND_F5 from rank 2: rank 2 stopped responding (no heartbeat for 5.0 s)\" >&2; "
      "exit 1";
  const Launched run = launch_shells(4, program, {"--timeout-grace", "1"});
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_LT(run.seconds, 6.0) << run.out;
  const auto lines = lines_of(run.out);
  ASSERT_FALSE(lines.empty());
  // The ranks that got to say why they failed before the launcher stopped them are listed as consequences.
  int consequences = 0;
  for (const char* rank : {"0", "1", "3"}) {
    consequences += has_line(run.out, std::string("dualpipe launch: rank ") + rank +
                                          " exited with status 1 only because of rank 2 (its error names rank 2)");
  }
  EXPECT_GE(consequences, 1) << run.out;
  EXPECT_EQ(lines.back().rfind("dualpipe launch: rank 2 failed first: it was still running when rank ", 0), 0u)
      << run.out;
  EXPECT_NE(lines.back().find("exited because of it; stopped "), std::string::npos) << run.out;
  expect_all_gone(dir.pids(), 4);
}

// The first failure by time is blamed; a rank that failed later naming it is its consequence, whatever the ranks'
// numbers.
TEST(Launch, TheFirstFailureIsBlamedAndALaterOneNamingItIsItsConsequence) {
  TempDir dir;
  const std::string program =
      "trap '' TERM; " + record_shell_pid(dir.path()) + wait_for_pid_files(dir.path(), 2) +
      "if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 0.3; "
      "echo \"rank 0: peer rank 1 closed the connection (its process exited or was killed)\" >&2; exit 1";
  const Launched run = launch_shells(2, program);
  expect_job_failed_saying(run,
                           {"rank 0 exited with status 1 only because of rank 1 (its error names rank 1)",
                            // Rank 0 ended on its own within the others' time to (it was not stopped).
                            "rank 1 exited with status 3; no other rank was still running"},
                           dir, 2);
}

// A rank that fails on its own shortly after a peer (ours learn of a failure through the peer monitor) gets to say
// why: it was stopped with SIGTERM within milliseconds of the first failure and its own error was lost.
TEST(Launch, ARankThatFailsShortlyAfterAPeerKeepsItsOwnError) {
  TempDir dir;
  const std::string program = record_shell_pid(dir.path()) + wait_for_pid_files(dir.path(), 2) +
                              "if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 0.3; "
                              "echo \"rank 0: its own error, after rank 1's\" >&2; exit 1";
  const Launched run = launch_shells(2, program);
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(has_line(run.out, "[rank 0] rank 0: its own error, after rank 1's")) << run.out;
  EXPECT_EQ(run.out.find("was killed by signal"), std::string::npos) << run.out;
  expect_all_gone(dir.pids(), 2);
}

TEST(Launch, SignalToTheLauncherStopsEveryRank) {
  TempDir dir;
  const Launched run = launch_shells(3, record_pids_and_sleep(dir.path()), {}, [&](pid_t launcher) {
    wait_for_pids(dir, 6);
    kill(launcher, SIGTERM);
  });
  EXPECT_EQ(run.status, 128 + SIGTERM) << run.out;
  EXPECT_LT(run.seconds, 5.0) << run.out;
  EXPECT_TRUE(has_line(run.out, "dualpipe launch: got SIGTERM; stopped all 3 ranks")) << run.out;
  expect_all_gone(dir.pids(), 6);
}

// Gone, or a zombie waiting for whoever inherited it to reap it: either way it runs no more.
bool stopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  if (!(stat >> pid_field >> name >> state)) return true;
  return state == "Z" || state == "X";
}

TEST(Launch, RanksDieWithAKilledLauncher) {
  TempDir dir;
  std::vector<pid_t> pids;
  const Launched run = launch_shells(2, record_shell_pid(dir.path()) + "exec sleep 60", {}, [&](pid_t launcher) {
    pids = wait_for_pids(dir, 2);
    kill(launcher, SIGKILL);  // what the OOM killer does: no chance to stop anything
  });
  EXPECT_EQ(run.status, -SIGKILL) << run.out;
  ASSERT_EQ(pids.size(), 2u) << run.out;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (pid_t pid : pids) {
    while (!stopped(pid) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(stopped(pid)) << "rank process " << pid << " still runs 5 s after its launcher was killed";
  }
}

TEST(Launch, BadArgumentsExitWithStatus2AndSayWhy) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"launch", "--", "/bin/true"}, "dualpipe: launch needs --nproc-per-node N (or --nproc N)"},
      {{"launch", "--nproc", "0", "--", "/bin/true"}, "dualpipe: --nproc-per-node must be between 1 and 1024, got 0"},
      {{"launch", "--nproc", "5000", "--", "/bin/true"},
       "dualpipe: --nproc-per-node must be between 1 and 1024, got 5000"},
      {{"launch", "--nproc", "1", "--nnodes", "0", "--", "/bin/true"},
       "dualpipe: --nnodes must be between 1 and 4096, got 0"},
      {{"launch", "--nproc", "1", "--nnodes", "2", "--node-rank", "2", "--", "/bin/true"},
       "dualpipe: --node-rank must be below --nnodes (2): the nodes are numbered 0 to 1, got 2"},
      {{"launch", "--nproc", "2", "--nnodes", "2", "--world-size", "2", "--node-rank", "1", "--", "/bin/true"},
       "dualpipe: --nproc-per-node 2 on --nnodes 2 does not fit a world of 2 ranks"},
      {{"launch", "--nproc", "1", "--max-restarts", "-1", "--", "/bin/true"},
       "dualpipe: --max-restarts must be between 0 and 1000, got -1"},
      {{"launch", "--nproc", "1", "--master-addr", "192.0.2.1", "--master-port", "29999", "--", "/bin/true"},
       "dualpipe: --master-addr 192.0.2.1 is not an address of this machine, but this node (--node-rank 0) runs rank "
       "0"},
      {{"launch", "--nproc", "1", "--nnodes", "2", "--node-rank", "1", "--master-addr", "no-such-host.invalid", "--",
        "/bin/true"},
       "dualpipe: --master-addr 'no-such-host.invalid' does not resolve"},
      {{"launch", "--nproc", "2"}, "dualpipe: launch needs a PROGRAM to run"},
      {{"launch", "--nproc", "2", "--"}, "dualpipe: launch needs a PROGRAM to run"},
      {{"launch", "--nproc", "2", "--", "dualpipe-no-such-program"},
       "dualpipe: cannot run 'dualpipe-no-such-program': No such file or directory"},
      {{"launch", "--nproc", "2", "--", "/nonexistent/dir/prog"},
       "dualpipe: cannot run '/nonexistent/dir/prog': No such file or directory"},
      {{"launch", "--nproc", "2", "--timeout-grace", "-1", "--", "/bin/true"},
       "dualpipe: --timeout-grace must be between 0 and 3600 seconds, got -1"},
  };
  for (const Case& c : cases) {
    const Launched run = dualpipe(c.args);
    EXPECT_EQ(run.status, 2) << c.message << "\n" << run.out;
    EXPECT_NE(run.out.find(c.message), std::string::npos) << run.out;
    EXPECT_EQ(run.out.find("[rank"), std::string::npos) << run.out;
  }
}

TEST(Launch, HelpDescribesTheCommand) {
  const Launched run = dualpipe({"launch", "--help"});
  EXPECT_EQ(run.status, 0) << run.out;
  for (const char* text : {"--nproc", "--nproc-per-node", "--nnodes", "--node-rank", "--max-restarts", "--master-addr", "--master-port", "--timeout-grace", "PROGRAM", "MASTER_ADDR",
                           "RANK", "WORLD_SIZE", "LOCAL_RANK"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
}

}  // namespace
