// Process supervision for `dualpipe launch`: fork/exec of the ranks, failure detection and stopping.
// Single-threaded on purpose: one poll() loop watches every rank's stdout/stderr pipe plus a self-pipe that the
// signal handlers write to, so a child's exit (SIGCHLD) or a stop request (SIGINT/SIGTERM/SIGHUP) wakes the loop
// without busy-waiting, and output lines are written one after another (line_relay.h), never interleaved.
#include "launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>
#include <optional>

#include "dualpipe/error.h"
#include "line_relay.h"
#include "signal_pipe.h"

extern char** environ;

namespace dualpipe::cli {
namespace {

using Clock = std::chrono::steady_clock;

// After every rank's main process exited 0: how long a background child may keep printing (holding the pipe) or
// running in the rank's process group before the launcher stops it, so nothing is left behind.
constexpr auto kLinger = std::chrono::seconds(1);
// After SIGKILL: how long to wait for output pipes to close. Only a process that left its rank's process group
// (setsid) can still hold one open, and it cannot be stopped through the group, so the launcher stops waiting.
constexpr auto kAfterKill = std::chrono::seconds(2);
// While waiting for group members that are not the launcher's children (no SIGCHLD for them): re-check period.
constexpr int kGroupPollMs = 100;

const char* signal_name(int signo) {
  switch (signo) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return nullptr;
  }
}

std::string signal_text(int signo) {
  const char* name = signal_name(signo);
  return detail::concat("signal ", signo, name ? detail::concat(" (", name, ")") : std::string());
}

std::string ranks_text(int n) { return detail::concat(n, n == 1 ? " rank" : " ranks"); }

// ---- starting a rank -----------------------------------------------------------------------------------------

// Everything exec needs, prepared before fork, so that the child does little more than dup2() and exec.
struct ExecPlan {
  std::vector<std::string> env;
  std::vector<char*> argv, envp;
  int stdin_fd = -1, out_fd = -1, err_fd = -1, report_fd = -1;
  sigset_t mask;
  rlimit files;
  pid_t launcher = -1;
};

// In the forked child. Never returns: execs the program, or reports errno through the CLOEXEC pipe (which a
// successful exec closes, so the parent reads EOF) and exits.
[[noreturn]] void exec_child(const ExecPlan& plan) {
  setpgid(0, 0);  // its own group, so the launcher can stop it and everything it starts with one kill()
  // A rank never outlives its launcher, also when the launcher is SIGKILLed (or OOM-killed) and cannot stop it.
  // The signal survives exec. A launcher that died before this line left the rank to another parent already.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.launcher) _exit(127);
  dup2(plan.stdin_fd, STDIN_FILENO);
  dup2(plan.out_fd, STDOUT_FILENO);
  dup2(plan.err_fd, STDERR_FILENO);
  SignalPipe::restore_defaults_in_child();  // then unblock, as the launcher blocked them around fork()
  sigprocmask(SIG_SETMASK, &plan.mask, nullptr);
  setrlimit(RLIMIT_NOFILE, &plan.files);
  environ = const_cast<char**>(plan.envp.data());
  execvp(plan.argv[0], plan.argv.data());
  const int error = errno;
  if (write(plan.report_fd, &error, sizeof error) < 0) {
  }
  _exit(127);
}

struct Rank {
  int rank = 0;
  pid_t pid = -1;        // also its process group id: each rank leads its own group
  bool running = false;  // main process not reaped yet
  int status = 0;        // waitpid() status once reaped
  std::uint64_t exit_order = 0;  // when it was reaped: 1, 2, ... by reaping pass (ranks reaped together share one)
  int blames = -1;       // the rank its last error line says it failed because of (blamed_rank), -1: none
  LineRelay out, err;
};

bool is_failure(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

// The rank a line of a rank's stderr says it failed because of, as the communicators word it ("rank 2 stopped
// responding", "rank 2 did not answer", "peer rank 2 closed the connection", "ranks 2, 3 never arrived" names
// the first); -1 when the line blames no other rank of the job.
int blamed_rank(const std::string& line, int self, int nproc) {
  static const char* const kBlames[] = {" stopped responding", " did not answer", " closed the connection",
                                        " never arrived", " never joined"};
  for (std::size_t at = line.find("rank"); at != std::string::npos; at = line.find("rank", at + 1)) {
    std::size_t p = at + 4;
    if (p < line.size() && line[p] == 's') ++p;  // "ranks 2, 3 never arrived"
    if (p >= line.size() || line[p] != ' ') continue;
    ++p;
    const std::size_t digits = p;
    long n = 0;
    while (p < line.size() && std::isdigit(static_cast<unsigned char>(line[p])) && n < 1'000'000)
      n = n * 10 + (line[p++] - '0');
    if (p == digits || n == self || n >= nproc) continue;
    std::size_t rest = p;
    while (rest < line.size() && (line[rest] == ',' || line[rest] == ' ' || std::isdigit(static_cast<unsigned char>(line[rest]))))
      ++rest;  // the other ranks of a list
    for (const char* blame : kBlames) {
      if (line.compare(p, std::strlen(blame), blame) == 0) return static_cast<int>(n);
      if (rest > p && line.compare(rest - 1, std::strlen(blame), blame) == 0) return static_cast<int>(n);
    }
  }
  return -1;
}

// ---- supervision ---------------------------------------------------------------------------------------------

class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, const SignalPipe& signals, const rlimit& original_files);
  ~Supervisor() { close(dev_null_); }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts every rank. When one cannot be executed, kills those already started and throws.
  void start_all();
  // Relays output and waits until every rank and everything it started is gone; returns the exit status.
  int supervise();

 private:
  int start(int r);  // 0 once rank r runs the program, else the errno of its failed exec
  void handle_signals();
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
  int report();
  void message(const std::string& text) { sink_.write_all(STDERR_FILENO, "dualpipe launch: " + text + "\n"); }

  const LaunchOptions& options_;
  const SignalPipe& signals_;
  rlimit original_files_;
  std::vector<std::string> base_env_;
  int dev_null_ = -1;
  std::vector<Rank> ranks_;
  OutputSink sink_;

  // Why the launcher stops, once it does: the first rank that failed, or the signal the launcher got.
  std::optional<int> failed_rank_;
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

Supervisor::Supervisor(const LaunchOptions& options, const SignalPipe& signals, const rlimit& original_files)
    : options_(options), signals_(signals), original_files_(original_files) {
  // The launcher's environment without the variables it sets, so a stale RANK from the caller cannot leak in.
  static const char* const kOwn[] = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                     "LOCAL_WORLD_SIZE"};
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (std::find(std::begin(kOwn), std::end(kOwn), name) == std::end(kOwn)) base_env_.push_back(entry);
  }
  base_env_.push_back("MASTER_ADDR=" + options.master_addr);
  base_env_.push_back(detail::concat("MASTER_PORT=", options.master_port));
  base_env_.push_back(detail::concat("WORLD_SIZE=", options.nproc));
  base_env_.push_back(detail::concat("LOCAL_WORLD_SIZE=", options.nproc));
  // Ranks run in their own process groups, i.e. in the background of a terminal, where reading it would stop
  // them (SIGTTIN): they get an empty stdin instead.
  dev_null_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  DUALPIPE_CHECK(dev_null_ >= 0, std::strerror(errno));
}

void Supervisor::start_all() {
  ranks_.reserve(static_cast<std::size_t>(options_.nproc));
  for (int r = 0; r < options_.nproc; ++r) {
    const int error = start(r);
    if (error == 0) continue;
    for (Rank& started : ranks_) {
      kill(-started.pid, SIGKILL);
      waitpid(started.pid, nullptr, 0);
      started.running = false;
    }
    throw InvalidArgument(detail::concat("cannot run '", options_.command[0], "': ", std::strerror(error),
                                         r > 0 ? detail::concat(" (starting rank ", r, ")") : std::string()));
  }
}

int Supervisor::start(int r) {
  ExecPlan plan;
  plan.env = base_env_;
  plan.env.push_back(detail::concat("RANK=", r));
  plan.env.push_back(detail::concat("LOCAL_RANK=", r));
  for (const std::string& a : options_.command) plan.argv.push_back(const_cast<char*>(a.c_str()));
  plan.argv.push_back(nullptr);
  for (std::string& e : plan.env) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  plan.files = original_files_;
  plan.launcher = getpid();

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
  rank.rank = r;
  rank.pid = pid;
  rank.running = true;
  const std::string prefix = detail::concat("[rank ", r, "] ");
  rank.out = LineRelay(out[0], STDOUT_FILENO, prefix);
  rank.err = LineRelay(err[0], STDERR_FILENO, prefix);
  ranks_.push_back(std::move(rank));
  ranks_.back().err.on_line([this, r](const std::string& line) {
    const int blamed = blamed_rank(line, r, options_.nproc);
    if (blamed >= 0) ranks_[static_cast<std::size_t>(r)].blames = blamed;
  });
  return 0;
}

int Supervisor::supervise() {
  for (;;) {
    handle_signals();
    reap();
    if (!stopping_) {
      for (const Rank& r : ranks_) {
        if (!r.running && is_failure(r.status)) {
          failed_rank_ = r.rank;  // report() picks the rank to blame once every rank's last words are in
          begin_stop(SIGTERM);
          break;
        }
      }
    }

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

void Supervisor::handle_signals() {
  for (int signo : signals_.drain()) {
    if (signo == SIGCHLD) continue;  // reap() looks at every child anyway
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
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.grace_seconds));
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
      message(detail::concat("rank ", r.rank, " did not stop within ", options_.grace_seconds, " s of ",
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

int Supervisor::report() {
  if (failed_rank_) {
    // The first failure by time: the earliest reaping pass (ranks reaped together: one that blames no other rank
    // first, then the lowest). The other failures before the stop began are only its consequences when their
    // errors name it (directly, or through a rank that names it).
    const Rank* first = nullptr;
    for (const Rank& r : ranks_) {
      if (r.running || !is_failure(r.status)) continue;
      if (!first || r.exit_order < first->exit_order ||
          (r.exit_order == first->exit_order && first->blames >= 0 && r.blames < 0)) {
        first = &r;
      }
    }
    DUALPIPE_CHECK(first != nullptr);
    auto cause_of = [&](const Rank& r) {
      int cause = r.rank;
      std::vector<bool> seen(ranks_.size(), false);
      while (ranks_[static_cast<std::size_t>(cause)].blames >= 0 && !seen[static_cast<std::size_t>(cause)]) {
        seen[static_cast<std::size_t>(cause)] = true;
        cause = ranks_[static_cast<std::size_t>(cause)].blames;
      }
      return cause;
    };
    const Rank& culprit = ranks_[static_cast<std::size_t>(cause_of(*first))];
    std::vector<int> followers;  // failed and named the culprit: exited only because of it
    for (const Rank& r : ranks_) {
      if (&r == &culprit || r.running || !is_failure(r.status) || r.blames < 0) continue;
      if (cause_of(r) != culprit.rank) continue;
      followers.push_back(r.rank);
      message(detail::concat("rank ", r.rank, " ", describe_wait_status(r.status), " only because of rank ",
                             culprit.rank, " (its error names rank ", r.blames, ")"));
    }
    std::string what;
    if (options_.nproc == 1) {
      // nothing to add: there was no other rank
    } else if (stopped_ == 0) {
      what = "; no other rank was still running";
    } else if (stopped_ == options_.nproc - 1) {
      what = stopped_ == 1 ? "; stopped the other rank" : detail::concat("; stopped the other ", stopped_, " ranks");
    } else {
      what = detail::concat("; stopped the ", stopped_, " other ", stopped_ == 1 ? "rank" : "ranks", " still running");
    }
    if (&culprit == first) {
      message(detail::concat("rank ", first->rank, " ", describe_wait_status(first->status), what));
    } else {
      std::string named;
      for (std::size_t i = 0; i < followers.size(); ++i)
        named += detail::concat(i == 0 ? "" : i + 1 == followers.size() ? " and " : ", ", followers[i]);
      const std::string state =
          culprit.running || !is_failure(culprit.status) || culprit.exit_order > first->exit_order
              ? "was still running when rank " + std::to_string(first->rank) + " exited"
              : describe_wait_status(culprit.status);
      message(detail::concat("rank ", culprit.rank, " failed first: it ", state, ", and rank",
                             followers.size() == 1 ? " " : "s ", named, " exited because of it; stopped ",
                             ranks_text(stopped_), " still running"));
    }
    return 1;
  }
  if (launcher_signal_ != 0) {
    std::string what = detail::concat("stopped the ", ranks_text(stopped_), " still running");
    if (stopped_ == options_.nproc) {
      what = stopped_ == 1 ? "stopped the rank" : detail::concat("stopped all ", stopped_, " ranks");
    }
    message(detail::concat("got ", signal_name(launcher_signal_), "; ", what));
    return 128 + launcher_signal_;
  }
  if (leftovers_) message("every rank exited 0; stopped the processes they left running");
  if (detached_output_) {
    message("every rank exited 0; not waiting for processes that left their process groups but still hold their "
            "output");
  }
  return 0;
}

}  // namespace

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return detail::concat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return detail::concat("was killed by ", signal_text(WTERMSIG(status)), WCOREDUMP(status) ? " (core dumped)" : "");
  }
  return detail::concat("ended with wait status ", status);
}

int launch(const LaunchOptions& options) {
  DUALPIPE_CHECK(options.nproc >= 1 && !options.command.empty());

  // Two pipes per rank stay open in the launcher: raise the soft open-file limit if it is too low. Ranks get
  // the original limit back (programs using select() may depend on it).
  rlimit original{};
  getrlimit(RLIMIT_NOFILE, &original);
  const rlim_t needed = static_cast<rlim_t>(2 * options.nproc + 32);
  if (original.rlim_cur != RLIM_INFINITY && original.rlim_cur < needed) {
    rlimit raised = original;
    raised.rlim_cur = original.rlim_max == RLIM_INFINITY ? needed : std::min(needed, original.rlim_max);
    setrlimit(RLIMIT_NOFILE, &raised);
    DUALPIPE_REQUIRE(raised.rlim_cur >= needed, "--nproc ", options.nproc, " needs about ", needed,
                     " open files, but the limit is ", raised.rlim_cur, " (see ulimit -n)");
  }

#ifdef __linux__
  // Orphaned grandchildren of the ranks are reparented to the launcher instead of init, so it reaps them and
  // kill(-group, 0) stops seeing them once they are gone, even where init does not reap (containers).
  prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif

  const SignalPipe signals;
  Supervisor supervisor(options, signals, original);
  supervisor.start_all();
  const int status = supervisor.supervise();
  setrlimit(RLIMIT_NOFILE, &original);
  return status;
}

}  // namespace dualpipe::cli
