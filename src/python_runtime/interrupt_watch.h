// Ctrl-C during a step (internal to dualpipe._runtime).
//
// Python runs its SIGINT handler on the main thread only, between bytecodes: a rank blocked in a wait with the
// GIL released would not see KeyboardInterrupt until the wait's timeout (five minutes by default). While an
// InterruptWatch lives, SIGINT also wakes a watcher thread, which calls `on_interrupt` (the pipeline ends its
// waits there); the step then returns to Python, whose own handler, which still ran first, raises
// KeyboardInterrupt. The caller makes one only where Python's default handler is installed
// (signal.default_int_handler), so a program with its own handler (a graceful stop at a step boundary) keeps it.
#pragma once

#include <functional>

namespace dualpipe::python_runtime {

class InterruptWatch {
 public:
  // `on_interrupt` runs on the watcher thread, never after the destructor returned.
  explicit InterruptWatch(std::function<void()> on_interrupt);
  ~InterruptWatch();
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

 private:
  bool installed_ = false;
};

}  // namespace dualpipe::python_runtime
