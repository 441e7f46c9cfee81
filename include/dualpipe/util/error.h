// Errors raised by dualpipe. Every exception thrown for bad user input derives from dualpipe::Error,
// so callers can catch one type; internal invariant failures carry the file and line of the check.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace dualpipe {

// The one project error type.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parameters a generator, parser or command cannot serve ("DualPipe needs an even number of ranks, got 5").
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A schedule that breaks a rule of the IR (missing action, placement mismatch, deadlock ...).
class InvalidSchedule : public Error {
 public:
  using Error::Error;
};

// A broken internal invariant: a bug in dualpipe, not in the caller's input.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Concatenates anything streamable: concat("got M=", m, " for R=", r).
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

}  // namespace dualpipe

// Throws InvalidArgument with the streamed message when `cond` is false. For user input.
#define DUALPIPE_REQUIRE(cond, ...)                                            \
  do {                                                                         \
    if (!(cond)) throw ::dualpipe::InvalidArgument(::dualpipe::detail::concat(__VA_ARGS__)); \
  } while (0)

// Internal invariant: throws InternalError naming file and line. Never compiled out.
#define DUALPIPE_CHECK(cond, ...)                                                          \
  do {                                                                                     \
    if (!(cond))                                                                           \
      throw ::dualpipe::InternalError(::dualpipe::detail::concat(                          \
          __FILE__, ":", __LINE__, ": check failed: " #cond " ", ##__VA_ARGS__));          \
  } while (0)
