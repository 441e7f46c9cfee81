// The self-pipe for signals (see signal_pipe.h).
#include "dualpipe/launch/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dualpipe/util/error.h"

namespace dualpipe::launch {
namespace {

// A signal handler can reach only globals. This is the one: the write end of the pipe. It is process-wide by
// nature (signal dispositions belong to the process), and the one live SignalPipe owns it.
int g_signal_pipe_write = -1;

extern "C" void on_signal(int signo) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  // Non-blocking: when the pipe is full it already holds enough wake-ups.
  if (write(g_signal_pipe_write, &byte, 1) < 0) {
  }
  errno = saved;
}

}  // namespace

SignalPipe::SignalPipe() {
  DUALPIPE_CHECK(g_signal_pipe_write < 0, "only one SignalPipe at a time");
  DUALPIPE_CHECK(pipe2(fds_, O_CLOEXEC | O_NONBLOCK) == 0, std::strerror(errno));
  g_signal_pipe_write = fds_[1];
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;  // a child stopped or continued has not exited
  for (std::size_t i = 0; i < std::size(kRouted); ++i) sigaction(kRouted[i], &action, &old_[i]);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &old_pipe_);
}

SignalPipe::~SignalPipe() {
  for (std::size_t i = 0; i < std::size(kRouted); ++i) sigaction(kRouted[i], &old_[i], nullptr);
  sigaction(SIGPIPE, &old_pipe_, nullptr);
  g_signal_pipe_write = -1;
  close(fds_[0]);
  close(fds_[1]);
}

std::vector<int> SignalPipe::drain() const {
  std::vector<int> signals;
  unsigned char buffer[64];
  ssize_t n;
  while ((n = read(fds_[0], buffer, sizeof buffer)) > 0) signals.insert(signals.end(), buffer, buffer + n);
  return signals;
}

sigset_t SignalPipe::routed_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kRouted) sigaddset(&set, s);
  return set;
}

namespace {

const char* g_program = "";
size_t g_program_size = 0;

void say_stopped(int signo) {
  const auto say = [](const char* text, size_t size) {
    if (write(STDERR_FILENO, text, size) < 0) {
    }
  };
  static constexpr char kInterrupted[] = ": stopped by SIGINT while no rank was running\n";
  static constexpr char kTerminated[] = ": stopped by SIGTERM while no rank was running\n";
  say(g_program, g_program_size);
  if (signo == SIGINT) say(kInterrupted, sizeof kInterrupted - 1);
  else say(kTerminated, sizeof kTerminated - 1);
  signal(signo, SIG_DFL);
  raise(signo);
}

}  // namespace

void say_when_stopped_while_no_rank_runs(const char* program) {
  g_program = program;
  g_program_size = std::strlen(program);
  for (int signo : {SIGINT, SIGTERM})
    if (signal(signo, say_stopped) == SIG_IGN) signal(signo, SIG_IGN);
}

void SignalPipe::restore_defaults_in_child() {
  for (int s : kRouted) signal(s, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
}

}  // namespace dualpipe::launch
