#include "output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "dualpipe/util/error.h"

namespace dualpipe::cli {
namespace {

[[noreturn]] void fail(int error) {
  throw Error(detail::concat("cannot write to standard output: ",
                             error != 0 ? std::strerror(error) : "the stream reported an error"));
}

}  // namespace

void write_stdout(std::string_view text) {
  errno = 0;
  std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::cout.flush();
  if (!std::cout) fail(errno);
}

void finish_stdout() {
  errno = 0;
  std::cout.flush();
  if (!std::cout) fail(errno);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) fail(errno);
}

}  // namespace dualpipe::cli
