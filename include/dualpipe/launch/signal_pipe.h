// Signals as events for a poll() loop (the self-pipe trick): while a SignalPipe exists, SIGCHLD, SIGINT, SIGTERM,
// SIGHUP and SIGUSR1 (a stall report asked for) each write one byte (the signal number) into a pipe whose read end
// the loop polls, so the loop sleeps until a child exits or a stop is requested, and a signal arriving just before
// poll() is not lost.
// SIGPIPE is ignored meanwhile: a closed stdout must not kill the launcher and orphan its children.
#pragma once

#include <signal.h>

#include <iterator>
#include <vector>

namespace dualpipe::launch {

class SignalPipe {
 public:
  SignalPipe();   // installs the handlers; at most one SignalPipe at a time (signal dispositions are per process)
  ~SignalPipe();  // restores the previous dispositions
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int read_fd() const { return fds_[0]; }

  // The signals received since the last call, oldest first (repeats of one signal may be merged by the kernel).
  std::vector<int> drain() const;

  // The routed signals, to block around fork() so that a child never runs the parent's handlers.
  static sigset_t routed_signals();
  // In a forked child before exec: default dispositions for the routed signals and SIGPIPE (an ignored signal
  // would stay ignored across exec). Async-signal-safe.
  static void restore_defaults_in_child();

 private:
  static constexpr int kRouted[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1};
  int fds_[2] = {-1, -1};
  struct sigaction old_[std::size(kRouted)] {};
  struct sigaction old_pipe_ {};
};

// Before a SignalPipe takes SIGINT and SIGTERM over (and after it gives them back), while no rank runs: each ends the
// process as its default action does, after "<program>: stopped by SIGTERM while no rank was running" on stderr,
// where it ended it without a word. One the caller ignores (a background job's SIGINT) stays ignored. `program`
// must live as long as the process (a string literal).
void say_when_stopped_while_no_rank_runs(const char* program);

}  // namespace dualpipe::launch
