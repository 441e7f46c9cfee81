// One grammar across the commands (issue 28, first part): `dualpipe --version`, kind names in any case with a
// suggestion for a slip, and `train --kind` beside `train --schedule`.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "cli/run_command.h"

namespace {

using dualpipe::test::CommandResult;

CommandResult dualpipe(const std::string& args) {
  return dualpipe::test::run_command(std::string(DUALPIPE_BIN) + " " + args);
}

TEST(Vocabulary, VersionPrintsTheProjectVersion) {
  const CommandResult run = dualpipe("--version");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(std::regex_match(run.out, std::regex("dualpipe [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << run.out;
}

TEST(Vocabulary, KindNamesAreCaseInsensitive) {
  const CommandResult lower = dualpipe("schedule --kind dualpipe -r 4 -m 8");
  ASSERT_EQ(lower.status, 0) << lower.out;
  for (const char* name : {"DualPipe", "DUALPIPE"}) {
    const CommandResult other = dualpipe(std::string("schedule --kind ") + name + " -r 4 -m 8");
    EXPECT_EQ(other.status, 0) << name << "\n" << other.out;
    EXPECT_EQ(other.out, lower.out) << name;
  }
  EXPECT_EQ(dualpipe("simulate --kind ZB-H1 -r 4 -m 8").status, 0);
}

TEST(Vocabulary, AMisspelledKindGetsTheClosestName) {
  EXPECT_REFUSED(dualpipe("schedule --kind dualpip -r 4 -m 8"), "did you mean 'dualpipe'?");
  EXPECT_REFUSED(dualpipe("schedule --kind 1fib -r 4 -m 8"), "did you mean '1f1b'?");
  EXPECT_REFUSED(dualpipe("simulate --kind zbb -r 4 -m 8"), "did you mean 'zbv'?");
  // Nothing close: the known kinds only.
  const CommandResult far = dualpipe("schedule --kind nosuch -r 4 -m 8");
  EXPECT_REFUSED(far, "unknown schedule kind 'nosuch' (known kinds: gpipe, 1f1b");
  EXPECT_EQ(far.out.find("did you mean"), std::string::npos) << far.out;
}

TEST(Vocabulary, TrainTakesKindLikeTheOtherCommands) {
  // The kind reaches the schedule generator through --kind as through --schedule (refused before any rank starts).
  EXPECT_REFUSED(dualpipe("train --kind dualpip --steps 1"), "did you mean 'dualpipe'?");
  EXPECT_REFUSED(dualpipe("train --schedule dualpip --steps 1"), "did you mean 'dualpipe'?");
  const CommandResult help = dualpipe("train --help");
  EXPECT_NE(help.out.find("--kind,--schedule"), std::string::npos) << help.out;
}

}  // namespace
