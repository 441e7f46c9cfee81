#include "interrupt_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <mutex>
#include <thread>

#include "dualpipe/util/error.h"

namespace dualpipe::python_runtime {
namespace {

// The handler ours chains to (Python's), read by the handler: set before ours is installed.
struct sigaction chained_action {};
int wake_pipe[2] = {-1, -1};
std::mutex callback_mutex;
std::function<void()> callback;  // the live watch's, under callback_mutex

void on_sigint(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (chained_action.sa_flags & SA_SIGINFO)
    chained_action.sa_sigaction(signal, info, context);
  else if (chained_action.sa_handler != SIG_DFL && chained_action.sa_handler != SIG_IGN)
    chained_action.sa_handler(signal);
  const char byte = 1;
  (void)!::write(wake_pipe[1], &byte, 1);  // async-signal-safe, and non-blocking: a full pipe drops the byte
  errno = saved_errno;
}

// One thread for the process, blocked in read() between interrupts.
void watch() {
  char byte;
  for (;;) {
    const ssize_t got = ::read(wake_pipe[0], &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return;
    std::lock_guard<std::mutex> lock(callback_mutex);
    if (callback) callback();
  }
}

void start_watcher_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    DUALPIPE_REQUIRE(::pipe2(wake_pipe, O_CLOEXEC) == 0, "cannot make the interrupt watcher's pipe: errno ", errno);
    ::fcntl(wake_pipe[1], F_SETFL, ::fcntl(wake_pipe[1], F_GETFL) | O_NONBLOCK);
    std::thread(watch).detach();
  });
}

bool is_ours(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) && action.sa_sigaction == on_sigint;
}

}  // namespace

InterruptWatch::InterruptWatch(std::function<void()> on_interrupt) {
  start_watcher_once();
  struct sigaction current {};
  ::sigaction(SIGINT, nullptr, &current);
  if (is_ours(current) || (!(current.sa_flags & SA_SIGINFO) &&
                           (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)))
    return;  // no Python handler to chain to (SIGINT ends or is ignored by the process as it is)
  {
    std::lock_guard<std::mutex> lock(callback_mutex);
    callback = std::move(on_interrupt);
  }
  chained_action = current;
  struct sigaction ours = current;
  ours.sa_flags = (current.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
  ours.sa_sigaction = on_sigint;
  ::sigaction(SIGINT, &ours, nullptr);
  installed_ = true;
}

InterruptWatch::~InterruptWatch() {
  if (!installed_) return;
  struct sigaction current {};
  ::sigaction(SIGINT, nullptr, &current);
  if (is_ours(current)) ::sigaction(SIGINT, &chained_action, nullptr);  // unless the program changed it meanwhile
  std::lock_guard<std::mutex> lock(callback_mutex);
  callback = nullptr;
}

}  // namespace dualpipe::python_runtime
