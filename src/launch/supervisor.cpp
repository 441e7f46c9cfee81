// Process supervision of one attempt (see supervisor.h). Single-threaded on purpose: one poll() loop watches
// every rank's stdout/stderr pipe plus a self-pipe that the signal handlers write to, so a child's exit (SIGCHLD)
// or a stop request (SIGINT/SIGTERM/SIGHUP) wakes the loop without busy-waiting, and output lines are written one
// after another (line_relay.h), never interleaved.
#include "dualpipe/launch/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>

#include "dualpipe/launch/exit_record.h"
#include "dualpipe/launch/failure_report.h"
#include "dualpipe/launch/line_relay.h"
#include "dualpipe/launch/signal_pipe.h"
#include "dualpipe/util/error.h"
#include "rank_process.h"
#include "ranks_text.h"

extern char** environ;

namespace dualpipe::launch {
namespace {

using Clock = std::chrono::steady_clock;

// After every rank's main process exited 0: how long a background child may keep printing (holding the pipe) or
// running in the rank's process group before the launcher stops it, so nothing is left behind.
constexpr auto kLinger = std::chrono::seconds(1);
// After SIGKILL: how long to wait for output pipes to close. Only a process that left its rank's process group
// (setsid) can still hold one open, and it cannot be stopped through the group, so the launcher stops waiting.
constexpr auto kAfterKill = std::chrono::seconds(2);
// After a rank failed: how long the others get to end on their own before they are stopped. Ours learn of the
// failure within milliseconds (the peer monitor) and print their own error, which a SIGTERM right away would cut off.
constexpr auto kLastWords = std::chrono::seconds(1);
// While waiting for group members that are not the launcher's children (no SIGCHLD for them): re-check period.
constexpr int kGroupPollMs = 100;

struct Rank {
  int rank = 0;
  pid_t pid = -1;        // also its process group id: each rank leads its own group
  bool running = false;  // main process not reaped yet
  int status = 0;        // waitpid() status once reaped
  std::uint64_t exit_order = 0;  // when it was reaped: 1, 2, ... by reaping pass (ranks reaped together share one)
  int blames = -1;       // the rank its exit record (or else its last error line) blames, -1: none
  bool has_exit_record = false;
  LineRelay out, err;
};

// ---- supervision ---------------------------------------------------------------------------------------------

class Supervisor {
 public:
  Supervisor(const Attempt& attempt, const SignalPipe& signals, const rlimit& original_files);
  ~Supervisor() { close(dev_null_); }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts every rank. When one cannot be executed, kills those already started and throws.
  void start_all();
  // Relays output and waits until every rank and everything it started is gone.
  AttemptResult supervise();

 private:
  int start(int local);  // 0 once local rank `local` runs the program, else the errno of its failed exec
  void handle_signals();
  void ask_for_stall_reports();
  void reap();
  int poll_timeout(Clock::time_point now, bool leaders_done, bool groups_alive) const;
  void wait_for_events(int timeout_ms);
  void begin_stop(int signo);
  void kill_now(int while_stopping_signal);
  void signal_groups(int signo);
  bool group_alive(const Rank& r) const { return kill(-r.pid, 0) == 0 || errno == EPERM; }
  int count_running() const {
    return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
  }
  AttemptResult report();
  void message(const std::string& text) { sink_.write_all(STDERR_FILENO, "dualpipe launch: " + text + "\n"); }

  const Attempt& attempt_;
  const SignalPipe& signals_;
  rlimit original_files_;
  std::vector<std::string> base_env_;
  int dev_null_ = -1;
  std::vector<Rank> ranks_;
  OutputSink sink_;

  // Why the launcher stops, once it does: the first rank that failed, or the signal the launcher got.
  bool failed_ = false;
  std::optional<Clock::time_point> first_failure_at_;  // when a rank's failure was first seen (kLastWords)
  int launcher_signal_ = 0;
  bool stopping_ = false;
  int stop_signal_ = 0;
  int stopped_ = 0;         // ranks still running when the stop began
  bool killed_ = false;     // SIGKILL sent
  bool leftovers_ = false;  // every rank exited 0 but left processes running in its group
  bool detached_output_ = false;  // every rank exited 0; processes outside their groups still hold the pipes
  Clock::time_point kill_at_{};  // when the stop turns into SIGKILL (or when it did)
  std::optional<Clock::time_point> all_exited_at_;
  std::uint64_t reap_passes_ = 0;
};

Supervisor::Supervisor(const Attempt& attempt, const SignalPipe& signals, const rlimit& original_files)
    : attempt_(attempt), signals_(signals), original_files_(original_files) {
  // The launcher's environment without the variables it sets, so a stale RANK from the caller cannot leak in.
  const std::vector<std::string>& own = rank_environment_names();
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (std::find(own.begin(), own.end(), name) == own.end()) base_env_.push_back(entry);
  }
  // Ranks run in their own process groups, i.e. in the background of a terminal, where reading it would stop
  // them (SIGTTIN): they get an empty stdin instead.
  dev_null_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  DUALPIPE_CHECK(dev_null_ >= 0, std::strerror(errno));
}

void Supervisor::start_all() {
  if (attempt_.rank_entry) {
    // Whatever is still buffered would be written once by the launcher and again by every rank.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
  }
  const int local_ranks = attempt_.layout.local_ranks();
  ranks_.reserve(static_cast<std::size_t>(local_ranks));
  for (int local = 0; local < local_ranks; ++local) {
    const int error = start(local);
    if (error == 0) continue;
    for (Rank& started : ranks_) {
      kill(-started.pid, SIGKILL);
      waitpid(started.pid, nullptr, 0);
      started.running = false;
    }
    throw InvalidArgument(detail::concat("cannot run '", attempt_.command[0], "': ", std::strerror(error),
                                         local > 0 ? detail::concat(" (starting rank ", attempt_.layout.first_rank() + local, ")")
                                                   : std::string()));
  }
}

int Supervisor::start(int local) {
  const Attempt& a = attempt_;
  ExecPlan plan;
  plan.env = base_env_;
  for (std::string& e : rank_environment(a.layout, local, a.master_addr, a.master_port, a.restart_count, a.max_restarts))
    plan.env.push_back(std::move(e));
  for (const std::string& word : a.command) plan.argv.push_back(const_cast<char*>(word.c_str()));
  plan.argv.push_back(nullptr);
  for (std::string& e : plan.env) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  plan.files = original_files_;
  plan.launcher = getpid();
  if (a.rank_entry) plan.entry = &a.rank_entry;

  int out[2], err[2], report[2];
  DUALPIPE_CHECK(pipe2(out, O_CLOEXEC) == 0, std::strerror(errno));
  DUALPIPE_CHECK(pipe2(err, O_CLOEXEC) == 0, std::strerror(errno));
  DUALPIPE_CHECK(pipe2(report, O_CLOEXEC) == 0, std::strerror(errno));
  plan.stdin_fd = dev_null_;
  plan.out_fd = out[1];
  plan.err_fd = err[1];
  plan.report_fd = report[1];

  // Signals stay blocked across fork, so the child cannot run the launcher's handlers before it resets them.
  const sigset_t handled = SignalPipe::routed_signals();
  sigprocmask(SIG_BLOCK, &handled, &plan.mask);
  const pid_t pid = fork();
  if (pid == 0) exec_child(plan);
  const int fork_error = errno;
  sigprocmask(SIG_SETMASK, &plan.mask, nullptr);
  close(out[1]);
  close(err[1]);
  close(report[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    close(report[0]);
    return fork_error;
  }
  // The child does this too; doing it here as well means the group exists before the launcher may signal it.
  setpgid(pid, pid);

  int exec_error = 0;
  ssize_t n;
  while ((n = read(report[0], &exec_error, sizeof exec_error)) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (n > 0) {
    waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    return exec_error;
  }
  Rank rank;
  const int r = a.layout.first_rank() + local;
  rank.rank = r;
  rank.pid = pid;
  rank.running = true;
  const std::string prefix = detail::concat("[rank ", r, "] ");
  rank.out = LineRelay(out[0], STDOUT_FILENO, prefix);
  rank.err = LineRelay(err[0], STDERR_FILENO, prefix);
  ranks_.push_back(std::move(rank));
  ranks_.back().err.on_line([this, r, local](const std::string& line) {
    Rank& rank = ranks_[static_cast<std::size_t>(local)];
    // The exit record of our ranks says whom they blame; other programs' errors are read for the usual words.
    if (const auto record = parse_exit_record(line)) {
      if (*record != r && *record < attempt_.layout.world_size) rank.blames = *record;
      rank.has_exit_record = true;
      return false;
    }
    const int blamed = blamed_rank(line, r, attempt_.layout.world_size);
    if (blamed >= 0 && !rank.has_exit_record) rank.blames = blamed;
    return true;
  });
  return 0;
}

AttemptResult Supervisor::supervise() {
  for (;;) {
    handle_signals();
    reap();
    if (!stopping_ && !first_failure_at_) {
      for (const Rank& r : ranks_) {
        if (!r.running && is_failure(r.status)) {
          failed_ = true;  // report() picks the rank to blame once every rank's last words are in
          first_failure_at_ = Clock::now();
          break;
        }
      }
    }
    if (!stopping_ && first_failure_at_ && (count_running() == 0 || Clock::now() >= *first_failure_at_ + kLastWords))
      begin_stop(SIGTERM);

    const Clock::time_point now = Clock::now();
    const bool leaders_done = count_running() == 0;
    if (leaders_done && !all_exited_at_) all_exited_at_ = now;
    const bool pipes_open = std::any_of(ranks_.begin(), ranks_.end(),
                                        [](const Rank& r) { return r.out.is_open() || r.err.is_open(); });
    const bool groups_alive =
        leaders_done && std::any_of(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return group_alive(r); });
    if (leaders_done && !pipes_open && !groups_alive) break;
    // Past SIGKILL's wait: only processes that left the ranks' groups can still hold the pipes.
    if (killed_ && now >= kill_at_ + kAfterKill) break;
    if (leaders_done && !stopping_ && now >= *all_exited_at_ + kLinger) {
      if (!groups_alive) {  // the pipes are held by processes outside the groups: out of reach, stop waiting
        detached_output_ = true;
        break;
      }
      leftovers_ = true;
      begin_stop(SIGTERM);
    }
    if (stopping_ && !killed_ && now >= kill_at_) kill_now(0);
    wait_for_events(poll_timeout(Clock::now(), leaders_done, groups_alive));
  }
  for (Rank& r : ranks_) {
    r.out.abandon(sink_);
    r.err.abandon(sink_);
  }
  return report();
}

// Whether process `pid` catches `signo` (the SigCgt mask of /proc/PID/status).
static bool catches(pid_t pid, int signo) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("SigCgt:", 0) == 0) return ((std::stoull(line.substr(7), nullptr, 16) >> (signo - 1)) & 1) != 0;
  return false;
}

// SIGUSR1 goes on to the ranks that catch it (dualpipe's trainer and Python pipelines ask for it to print a stall
// report: runtime/stall_watch.h); to the others its default action would end them. One rank that gets it is
// enough: its peers answer with their states.
void Supervisor::ask_for_stall_reports() {
  int asked = 0, running = 0;
  for (const Rank& r : ranks_) {
    if (!r.running) continue;
    ++running;
    if (catches(r.pid, SIGUSR1) && kill(r.pid, SIGUSR1) == 0) ++asked;
  }
  message(detail::concat("got SIGUSR1: asked ", asked, " of ", running, " running ranks for a stall report",
                         asked < running ? " (the others do not catch SIGUSR1)" : ""));
}

void Supervisor::handle_signals() {
  for (int signo : signals_.drain()) {
    if (signo == SIGCHLD) continue;  // reap() looks at every child anyway
    if (signo == SIGUSR1) {
      ask_for_stall_reports();
      continue;
    }
    if (!stopping_) {
      launcher_signal_ = signo;
      begin_stop(signo);  // forward the same signal: a program may treat SIGINT and SIGTERM differently
    } else if (!killed_) {
      kill_now(signo);  // asked again while stopping: do not wait for the grace period
    }
  }
}

void Supervisor::reap() {
  int status;
  pid_t pid;
  // Any child: besides the ranks, orphaned processes of their groups are reparented to the launcher (it is a
  // child subreaper) and only need reaping.
  ++reap_passes_;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (Rank& r : ranks_) {
      if (r.pid == pid && r.running) {
        r.running = false;
        r.status = status;
        r.exit_order = reap_passes_;
      }
    }
  }
}

int Supervisor::poll_timeout(Clock::time_point now, bool leaders_done, bool groups_alive) const {
  std::optional<Clock::time_point> wake;
  if (stopping_) wake = killed_ ? kill_at_ + kAfterKill : kill_at_;
  else if (first_failure_at_) wake = *first_failure_at_ + kLastWords;
  else if (leaders_done) wake = *all_exited_at_ + kLinger;
  int timeout_ms = -1;  // nothing to time: only output or a signal can change anything
  if (wake) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - now).count();
    timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, 60000));
  }
  if (groups_alive) timeout_ms = timeout_ms < 0 ? kGroupPollMs : std::min(timeout_ms, kGroupPollMs);
  return timeout_ms;
}

void Supervisor::wait_for_events(int timeout_ms) {
  std::vector<pollfd> fds = {pollfd{signals_.read_fd(), POLLIN, 0}};
  std::vector<LineRelay*> relays;
  for (Rank& r : ranks_) {
    for (LineRelay* relay : {&r.out, &r.err}) {
      if (!relay->is_open()) continue;
      fds.push_back(pollfd{relay->fd(), POLLIN, 0});
      relays.push_back(relay);
    }
  }
  if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
    DUALPIPE_CHECK(errno == EINTR, "poll: ", std::strerror(errno));
    return;
  }
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) relays[i - 1]->pump(sink_);
  }
}

void Supervisor::begin_stop(int signo) {
  stopping_ = true;
  stop_signal_ = signo;
  stopped_ = count_running();
  kill_at_ = Clock::now() +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(attempt_.grace_seconds));
  signal_groups(signo);
}

// while_stopping_signal: a stop signal the launcher got while already stopping; 0: the grace period ran out.
void Supervisor::kill_now(int while_stopping_signal) {
  for (const Rank& r : ranks_) {
    if (!r.running) continue;
    if (while_stopping_signal != 0) {
      message(detail::concat("got ", signal_name(while_stopping_signal), " while stopping; sending SIGKILL to rank ",
                             r.rank));
    } else {
      message(detail::concat("rank ", r.rank, " did not stop within ", attempt_.grace_seconds, " s of ",
                             signal_name(stop_signal_), "; sending SIGKILL"));
    }
  }
  signal_groups(SIGKILL);
  killed_ = true;
  kill_at_ = Clock::now();
}

void Supervisor::signal_groups(int signo) {
  // A rank that already exited may have left processes in its group (they may hold its pipes): stop them too.
  for (const Rank& r : ranks_) {
    if (r.running || r.out.is_open() || r.err.is_open() || group_alive(r)) kill(-r.pid, signo);
  }
}

AttemptResult Supervisor::report() {
  AttemptResult result;
  if (failed_) {
    std::vector<RankEnd> ended;
    for (const Rank& r : ranks_) ended.push_back(RankEnd{r.rank, r.status, r.exit_order, r.blames});
    FailureReport failure = describe_failure(ended, stopped_, static_cast<int>(ranks_.size()));
    for (const std::string& line : failure.lines) message(line);
    result.outcome = AttemptResult::Outcome::rank_failed;
    result.status = 1;
    result.cause = std::move(failure.cause);
    return result;
  }
  if (launcher_signal_ != 0) {
    const int n = static_cast<int>(ranks_.size());
    std::string what = detail::concat("stopped the ", ranks_text(stopped_), " still running");
    if (stopped_ == n) what = stopped_ == 1 ? "stopped the rank" : detail::concat("stopped all ", stopped_, " ranks");
    message(detail::concat("got ", signal_name(launcher_signal_), "; ", what));
    result.outcome = AttemptResult::Outcome::launcher_signalled;
    result.status = 128 + launcher_signal_;
    return result;
  }
  if (leftovers_) message("every rank exited 0; stopped the processes they left running");
  // A reader that went away chose to stop reading (`| head`); a full disk or a broken device lost the output.
  if (const int error = sink_.error(STDOUT_FILENO); error != 0 && error != EPIPE) {
    message(detail::concat("every rank exited 0, but their output is lost: cannot write to standard output: ",
                           std::strerror(error)));
    result.status = 1;
  }
  if (detached_output_) {
    message("every rank exited 0; not waiting for processes that left their process groups but still hold their "
            "output");
  }
  return result;
}

}  // namespace

AttemptResult run_attempt(const Attempt& attempt, const SignalPipe& signals, const rlimit& original_files) {
  Supervisor supervisor(attempt, signals, original_files);
  supervisor.start_all();
  return supervisor.supervise();
}

}  // namespace dualpipe::launch
