// Writing a command's output to stdout so that a failed write (a full disk, /dev/full, a closed pipe) is an
// error with a message instead of lost output and exit status 0.
#pragma once

#include <string_view>

namespace dualpipe::cli {

// Writes `text` to stdout and flushes it; throws OutputError naming the errno text when either fails.
void write_stdout(std::string_view text);

// Flushes stdout (std::cout and C stdio); throws OutputError when it or any earlier write failed. main() calls
// it after every command, so output printed piecewise is checked too.
void finish_stdout();

}  // namespace dualpipe::cli
