// The util layer on its own (until now tested only through the commands that use it): byte sizes read and written
// by hand-worked values, the median of even and odd counts, printable messages, and the atomic writer leaving the
// old file whole when the new contents fail half-way; printed commands read back by a real shell.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/median.h"
#include "dualpipe/util/printable.h"
#include "dualpipe/util/shell_words.h"
#include "test_helpers.h"

namespace dualpipe {
namespace {

TEST(ByteSize, UnitsAreBinaryOrDecimalByTheirSpelling) {
  EXPECT_EQ(parse_byte_size("4G", "--max-memory"), 4LL << 30);
  EXPECT_EQ(parse_byte_size("24GiB", "--max-memory"), 24LL << 30);
  EXPECT_EQ(parse_byte_size("512MB", "--max-memory"), 512'000'000LL);
  EXPECT_EQ(parse_byte_size("3e9", "--max-memory"), 3'000'000'000LL);
  EXPECT_EQ(parse_byte_size("1kib", "--max-memory"), 1024);  // any case
  EXPECT_EQ(describe_bytes(1.5 * (1 << 30)), "1.5 GiB");
  EXPECT_EQ(describe_bytes(17), "17 bytes");
  for (const char* bad : {"0", "-1G", "4 parsecs", "", "1e19"})
    EXPECT_TRUE(test::contains(test::error_text([&] { parse_byte_size(bad, "--max-memory"); }), "--max-memory"))
        << bad;
}

TEST(Median, OfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
}

TEST(Printable, ControlCharactersAreEscapedAndLongMessagesCut) {
  EXPECT_EQ(printable("a\tb\x01"), "a\tb\\x01");        // a message's tabs and newlines stay
  EXPECT_EQ(printable_line("a\tb\x01"), "a\\x09b\\x01");  // on one line, they do not
  EXPECT_EQ(first_unprintable("ok\x7f"), 2u);
  const std::string cut = printable_message(std::string(10000, 'x'), 100);
  EXPECT_LT(cut.size(), 200u);
  EXPECT_EQ(cut.substr(0, 50), std::string(50, 'x'));
}

TEST(AtomicFile, AFailedWriteLeavesTheOldContentsAndNoStrayFile) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "dualpipe_util_atomic";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "out.txt").string();
  write_file_atomically(path, "old contents\n");
  EXPECT_THROW(write_file_atomically(path, [](std::ostream& out) {
                 out << "half of the new";
                 throw std::runtime_error("the writer failed");
               }),
               std::runtime_error);
  std::ifstream in(path);
  std::stringstream read;
  read << in.rdbuf();
  EXPECT_EQ(read.str(), "old contents\n");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);
  EXPECT_TRUE(test::contains(test::error_text([&] { check_can_write_file((dir / "no/such/folder/x").string()); }),
                             "no/such/folder"));
  std::filesystem::remove_all(dir);
}

// The reference is /bin/sh itself: each quoted word, read back by the shell, is the word given.
TEST(ShellWords, AShellReadsEachQuotedWordBackAsGiven) {
  const std::vector<std::string> words = {"dualpipe", "--trace", "", "it's", "a b", "$HOME", "`id`", "x;y", "*",
                                          "--rank-speed", "1,0.5", "line\nbreak", "tab\there", "\\", "~", "!"};
  const std::string script = "printf '%s\\n' " + shell_command(words);
  FILE* shell = popen(("/bin/sh -c " + shell_quoted(script)).c_str(), "r");
  ASSERT_NE(shell, nullptr);
  std::string out;
  char buffer[256];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, shell)) > 0;) out.append(buffer, n);
  ASSERT_EQ(pclose(shell), 0);
  std::string expected;
  for (const std::string& word : words) expected += word + "\n";
  EXPECT_EQ(out, expected);
  EXPECT_EQ(shell_quoted("--layers-per-stage"), "--layers-per-stage");  // plain words stay as they are
  EXPECT_EQ(shell_quoted("/tmp/run_1/a.json"), "/tmp/run_1/a.json");
}

}  // namespace
}  // namespace dualpipe
