// Running a command line as a user would, for the CLI tests: through the shell, with stdout and stderr together.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace dualpipe::test {

struct CommandResult {
  int status = -1;  // exit status; -1 when the shell could not start or the command died of a signal
  std::string out;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command_line) {
  const std::string command = command_line + " 2>&1";
  CommandResult run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buffer{};
  std::size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

// `dualpipe ARGS`, the program this build made.
inline CommandResult dualpipe(const std::string& args) { return run_command(std::string(DUALPIPE_BIN) + " " + args); }

// A command line (or options added to one) that must be refused, and what the refusal must say.
struct Refusal {
  std::string args, says;
};

// Each `dualpipe ARGS` exits 2 (bad input) with `says` in its output.
inline void expect_each_refused(const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    const CommandResult run = dualpipe(c.args);
    EXPECT_EQ(run.status, 2) << c.args << "\n" << run.out;
    EXPECT_NE(run.out.find(c.says), std::string::npos) << c.args << "\n" << run.out;
  }
}

}  // namespace dualpipe::test

// A command refused as bad input: exit status 2 and `text` in its output.
#define EXPECT_REFUSED(result, text)                                                                 \
  do {                                                                                               \
    const ::dualpipe::test::CommandResult& r_ = (result);                                            \
    EXPECT_EQ(r_.status, 2) << r_.out;                                                               \
    EXPECT_NE(r_.out.find(text), std::string::npos) << "expected '" << (text) << "' in:\n" << r_.out; \
  } while (0)
