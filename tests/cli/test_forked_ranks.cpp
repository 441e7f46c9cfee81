// Ranks that are forks of the launcher (launch::LaunchOptions::rank_entry, how `dualpipe train` starts its ranks)
// must be what executed ranks are: their own environment and prefixed output, their failure stopping the others,
// and no descriptor of the launcher's beyond their own standard ones. The reference is what an executed program
// gets (test_launch.cpp checks those through `dualpipe launch`) and the kernel's list of open descriptors.
#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "dualpipe/launch/launch.h"
#include "dualpipe/launch/node_layout.h"
#include "test_helpers.h"

namespace {

struct ForkedLaunch {
  int status = -1;  // the launcher's exit status
  std::string out;  // what it and its ranks wrote to stdout and stderr
};

// Runs launch::run with `ranks` forked ranks calling `entry`, in a child whose stdout and stderr go to a file, so
// that the launcher's own process is a fresh single-threaded one, as in `dualpipe train`.
ForkedLaunch launch_forks(int ranks, const std::function<int()>& entry) {
  char path[] = "/tmp/dualpipe-forked-ranks-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    dualpipe::launch::LaunchOptions options;
    options.layout = dualpipe::launch::layout_per_node(1, 0, ranks);
    options.command = {"forked-rank"};
    options.grace_seconds = 1;
    options.rank_entry = entry;
    try {
      std::_Exit(dualpipe::launch::run(options));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "threw: %s\n", e.what());
      std::fflush(stderr);
      std::_Exit(2);
    }
  }
  close(fd);
  ForkedLaunch result;
  int status = 0;
  waitpid(pid, &status, 0);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  result.out = text.str();
  unlink(path);
  return result;
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "unset";
}

// The descriptors this process holds above stderr, as "3 4 ..." ("" when none); with `exec_keeps`, only those that
// an exec would keep (not close-on-exec).
std::string descriptors_above_stderr(bool exec_keeps = false) {
  std::string listed;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return "cannot list";
  while (const dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(dir)) continue;
    if (exec_keeps && (fcntl(fd, F_GETFD) & FD_CLOEXEC)) continue;
    listed += (listed.empty() ? "" : " ") + std::to_string(fd);
  }
  closedir(dir);
  return listed;
}

using dualpipe::test::contains;

TEST(Launch, ForkedRanksGetTheirEnvironmentAndPrefixAndNoneOfTheLaunchersDescriptors) {
  // What this test inherited from whoever started it, which an executed rank would inherit too.
  const std::string inherited = descriptors_above_stderr(true);
  const ForkedLaunch run = launch_forks(3, [] {
    std::printf("rank %s of %s, local %s of %s, restart %s, master %s:%s\n", env("RANK").c_str(),
                env("WORLD_SIZE").c_str(), env("LOCAL_RANK").c_str(), env("LOCAL_WORLD_SIZE").c_str(),
                env("TORCHELASTIC_RESTART_COUNT").c_str(), env("MASTER_ADDR").c_str(), env("MASTER_PORT").c_str());
    std::printf("descriptors above stderr: [%s]\n", descriptors_above_stderr().c_str());
    return 0;
  });
  EXPECT_EQ(run.status, 0) << run.out;
  for (int r = 0; r < 3; ++r) {
    const std::string prefix = "[rank " + std::to_string(r) + "] ";
    EXPECT_TRUE(contains(run.out, prefix + "rank " + std::to_string(r) + " of 3, local " + std::to_string(r) +
                                      " of 3, restart 0, master 127.0.0.1:"))
        << run.out;
    // The launcher's pipes of the other ranks, its signal pipe and exec report pipe are close-on-exec: an executed
    // program would hold only what the launcher inherited.
    EXPECT_TRUE(contains(run.out, prefix + "descriptors above stderr: [" + inherited + "]")) << run.out;
  }
}

TEST(Launch, AFailingForkedRankStopsTheOthersAndIsNamed) {
  const ForkedLaunch run = launch_forks(3, [] {
    if (env("RANK") == "1") return 3;
    pause();  // until the launcher stops it
    return 0;
  });
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(contains(run.out, "rank 1 exited with status 3")) << run.out;
}

TEST(Launch, ALauncherWithThreadsRefusesToForkRanks) {
  std::thread sleeper([] { std::this_thread::sleep_for(std::chrono::seconds(2)); });
  // launch_forks forks first, and a fork has one thread: so the check runs here, in the process that has two.
  dualpipe::launch::LaunchOptions options;
  options.layout = dualpipe::launch::layout_per_node(1, 0, 2);
  options.command = {"forked-rank"};
  options.rank_entry = [] { return 0; };
  try {
    dualpipe::launch::run(options);
    ADD_FAILURE() << "launched forked ranks from a process with two threads";
  } catch (const std::exception& e) {
    EXPECT_TRUE(contains(e.what(), "the launcher forks its ranks, so it must have one thread, not 2")) << e.what();
  }
  sleeper.join();
}

}  // namespace
