// Whole-line relay of a child's output with a prefix (see line_relay.h).
#include "dualpipe/launch/line_relay.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace dualpipe::launch {
namespace {

// Lines longer than this are relayed in pieces of this size, each with its prefix, so a program that prints
// without newlines (progress bars with '\r') cannot make the launcher's memory grow without bound.
constexpr std::size_t kMaxLine = std::size_t{1} << 20;

}  // namespace

void OutputSink::write_all(int fd, const std::string& data) {
  if (fd < 0 || fd > 2 || error_[fd] != 0) return;
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {  // the launcher's own output may be non-blocking: wait until it drains
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, -1);
    } else {
      error_[fd] = n < 0 ? errno : EIO;
      return;
    }
  }
}

LineRelay::LineRelay(int fd, int target, std::string prefix) : fd_(fd), target_(target), prefix_(std::move(prefix)) {}

LineRelay::~LineRelay() { close_fd(); }

LineRelay::LineRelay(LineRelay&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      target_(other.target_),
      prefix_(std::move(other.prefix_)),
      partial_(std::move(other.partial_)),
      observer_(std::move(other.observer_)) {}

LineRelay& LineRelay::operator=(LineRelay&& other) noexcept {
  if (this != &other) {
    close_fd();
    fd_ = std::exchange(other.fd_, -1);
    target_ = other.target_;
    prefix_ = std::move(other.prefix_);
    partial_ = std::move(other.partial_);
    observer_ = std::move(other.observer_);
  }
  return *this;
}

void LineRelay::pump(OutputSink& sink) {
  if (fd_ < 0) return;
  char buffer[65536];
  const ssize_t n = read(fd_, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  const bool at_end = n <= 0;  // EOF, or an error that ends the stream just the same
  if (n > 0) partial_.append(buffer, static_cast<std::size_t>(n));
  std::string out;
  take_lines(at_end, out);
  if (!out.empty()) sink.write_all(target_, out);
  if (at_end) close_fd();
}

void LineRelay::abandon(OutputSink& sink) {
  std::string out;
  take_lines(true, out);
  if (!out.empty()) sink.write_all(target_, out);
  close_fd();
}

void LineRelay::take_lines(bool at_end, std::string& out) {
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (observer_ && !observer_(partial_.substr(start, nl - start))) continue;
    out += prefix_;
    out.append(partial_, start, nl + 1 - start);
  }
  partial_.erase(0, start);
  while (partial_.size() >= kMaxLine) {
    out += prefix_;
    out.append(partial_, 0, kMaxLine);
    out += '\n';
    partial_.erase(0, kMaxLine);
  }
  if (at_end && !partial_.empty()) {
    if (observer_ && !observer_(partial_)) {
      partial_.clear();
      return;
    }
    out += prefix_;
    out += partial_;
    out += '\n';
    partial_.clear();
  }
}

void LineRelay::close_fd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace dualpipe::launch
