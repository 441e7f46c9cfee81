#include "output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "dualpipe/util/atomic_file.h"
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

CLI::Option* add_output_option(CLI::App& command, std::string& path) {
  return command.add_option("-o,--output", path,
                            "Write the output to FILE instead of standard output (written whole or not at all)");
}

void add_format_and_output(CLI::App& command, std::string& format, std::string& output,
                           const std::vector<std::string>& forms, const std::string& help) {
  command.add_option("-f,--format", format, help)->check(CLI::IsMember(forms))->capture_default_str();
  add_output_option(command, output);
}

void check_output(const std::string& path, const std::vector<NamedPath>& inputs) {
  if (path.empty()) return;
  check_can_write_file(path);
  check_outputs_apart(inputs, {{"-o", path}});
}

void write_output(const std::string& path, std::string_view text) {
  if (path.empty()) {
    write_stdout(text);
  } else {
    write_file_atomically(path, std::string(text));
  }
}

}  // namespace dualpipe::cli
