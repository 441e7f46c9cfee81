// Relaying a child's output pipe to the launcher's stdout or stderr one whole line at a time, each line after a
// prefix ("[rank 2] "). A line is written only once its newline has arrived, with one write() call for all the
// finished lines of one read, so lines of different children can never interleave in the launcher's output.
#pragma once

#include <functional>
#include <string>

namespace dualpipe::launch {

// The launcher's stdout and stderr. A failed write (a reader that went away, EPIPE with SIGPIPE ignored, or a
// full disk) only loses output, so the launcher keeps supervising its children instead of dying and orphaning
// them; the first error is kept for the launcher's exit status.
class OutputSink {
 public:
  void write_all(int fd, const std::string& data);
  // The errno of the first failed write to `fd` (0: none).
  int error(int fd) const { return fd >= 0 && fd <= 2 ? error_[fd] : 0; }

 private:
  int error_[3] = {0, 0, 0};
};

class LineRelay {
 public:
  LineRelay() = default;
  // Takes ownership of `fd`, the read end of a pipe; its lines go to `target` (STDOUT_FILENO or STDERR_FILENO).
  LineRelay(int fd, int target, std::string prefix);
  ~LineRelay();
  LineRelay(LineRelay&& other) noexcept;
  LineRelay& operator=(LineRelay&& other) noexcept;
  LineRelay(const LineRelay&) = delete;
  LineRelay& operator=(const LineRelay&) = delete;

  // Called with every finished line (without prefix or newline) before it is relayed; a line for which it returns
  // false is not relayed. The launcher reads the ranks' errors and exit records through it to learn which rank
  // each one blames.
  void on_line(std::function<bool(const std::string&)> observer) { observer_ = std::move(observer); }

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // Reads once (call when poll() says the pipe is readable) and writes the lines that are now finished. At end of
  // file, also writes an unfinished last line (with a newline added) and closes the pipe.
  void pump(OutputSink& sink);
  // Writes an unfinished last line and closes the pipe without waiting for its end (its writer is out of reach).
  void abandon(OutputSink& sink);

 private:
  void take_lines(bool at_end, std::string& out);
  void close_fd();

  int fd_ = -1;
  int target_ = 1;
  std::string prefix_;
  std::string partial_;  // received bytes of the line not finished yet
  std::function<bool(const std::string&)> observer_;
};

}  // namespace dualpipe::launch
