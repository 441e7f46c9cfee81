// The byte tokenizer and the corpus reader, checked against hand-computed values and files written here.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dualpipe/util/number_format.h"
#include "dualpipe/util/printable.h"
#include "dualpipe/data/byte_tokenizer.h"
#include "dualpipe/data/corpus.h"
#include "test_helpers.h"

namespace dualpipe::data {
namespace {

namespace fs = std::filesystem;
using test::contains;
using test::error_message;

// ---- tokenizer ----

TEST(ByteTokenizer, EncodesEveryByteAsItsValueAndRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const ByteTokenizer tok;
  const std::vector<int64_t> tokens = tok.encode(all);
  ASSERT_EQ(tokens.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tokens[b], b);
  EXPECT_EQ(tok.decode(tokens), all);
  EXPECT_EQ(ByteTokenizer::kVocabSize, 256);
}

TEST(ByteTokenizer, EncodesUtf8AsItsBytes) {
  // U+00E9 (e acute) is C3 A9 in UTF-8.
  EXPECT_EQ(ByteTokenizer().encode("a\xC3\xA9"), (std::vector<int64_t>{97, 0xC3, 0xA9}));
  EXPECT_TRUE(ByteTokenizer().encode("").empty());
  EXPECT_EQ(ByteTokenizer().decode({}), "");
}

TEST(ByteTokenizer, DecodeRejectsTokensOutsideAByte) {
  const std::string high = error_message([] { ByteTokenizer().decode({65, 256}); });
  EXPECT_TRUE(contains(high, "256")) << high;
  EXPECT_TRUE(contains(high, "position 1")) << high;
  const std::string negative = error_message([] { ByteTokenizer().decode({-1}); });
  EXPECT_TRUE(contains(negative, "-1")) << negative;
}

// ---- entropy ----

double entropy_of(const std::string& text) {
  Corpus c;
  c.text = text;
  return c.unigram_entropy_nats();
}

TEST(CorpusEntropy, MatchesHandComputedValues) {
  EXPECT_NEAR(entropy_of("aabb"), std::log(2.0), 1e-15);
  EXPECT_EQ(entropy_of("aaaa"), 0.0);
  EXPECT_EQ(entropy_of(""), 0.0);
  // p = 1/2, 1/3, 1/6: H = 1/2 ln 2 + 1/3 ln 3 + 1/6 ln 6 = 2/3 ln 2 + 1/2 ln 3 = 1.0114042647...
  EXPECT_NEAR(entropy_of("aaabbc"), 2.0 / 3 * std::log(2.0) + 0.5 * std::log(3.0), 1e-15);
  EXPECT_NEAR(entropy_of("cabbaa"), 1.0114042647, 1e-9);
  // Four equally likely bytes, including NUL and 0xFF: ln 4.
  EXPECT_NEAR(entropy_of(std::string("\0\xFF" "ab", 4)), std::log(4.0), 1e-15);
}

// ---- corpus files ----

// A fresh directory under the system's temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dualpipe-data-XXXXXX").string();
    const char* made = mkdtemp(pattern.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `bytes` to `name` (relative to the directory) and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(Corpus, ReadsOneFile) {
  TempDir dir;
  const std::string a = dir.write("a.txt", "hello\n");
  const Corpus c = Corpus::from_files({a});
  EXPECT_EQ(c.text, "hello\n");
  EXPECT_EQ(c.bytes(), 6u);
  EXPECT_EQ(c.files, std::vector<std::string>{a});
  EXPECT_EQ(c.source, a);
}

TEST(Corpus, ReadsPathsInTheOrderGivenAndAFileOnce) {
  TempDir dir;
  const std::string a = dir.write("a", "A"), b = dir.write("b", "B");
  const Corpus c = Corpus::from_files({b, a, b});
  EXPECT_EQ(c.text, "BA");
  EXPECT_EQ(c.files, (std::vector<std::string>{b, a}));
  EXPECT_EQ(c.source, "2 files: " + b + ", " + a);
}

TEST(Corpus, MissingFileIsNamed) {
  TempDir dir;
  const std::string missing = dir / "nope.txt";
  const std::string msg = error_message([&] { Corpus::from_files({missing}); });
  EXPECT_TRUE(contains(msg, "--data '" + missing + "'")) << msg;
  EXPECT_TRUE(contains(msg, "does not exist")) << msg;
  EXPECT_TRUE(contains(error_message([] { Corpus::from_files({}); }), "--data"));
}

TEST(Corpus, EmptyFileIsNamed) {
  TempDir dir;
  dir.write("full", "x");
  const std::string empty = dir.write("empty", "");
  const std::string msg = error_message([&] { Corpus::from_files({dir / "full", empty}); });
  EXPECT_TRUE(contains(msg, "--data '" + empty + "'")) << msg;
  EXPECT_TRUE(contains(msg, "empty")) << msg;
  // In a directory too.
  const std::string in_dir = error_message([&] { Corpus::from_files({dir.str()}); });
  EXPECT_TRUE(contains(in_dir, empty)) << in_dir;
}

TEST(Corpus, NulByteMakesAFileBinary) {
  TempDir dir;
  const std::string bin = dir.write("bin", std::string("ab\0cd", 5));
  const std::string msg = error_message([&] { Corpus::from_files({bin}); });
  EXPECT_TRUE(contains(msg, bin)) << msg;
  EXPECT_TRUE(contains(msg, "NUL byte at offset 2")) << msg;
}

TEST(Corpus, MoreThanOneControlByteInTenIsBinary) {
  TempDir dir;
  // 100 bytes, 11 of them \x01 (the first at offset 5): 11% > 10%.
  std::string text(100, 'a');
  for (int i = 0; i < 11; ++i) text[5 + 7 * i] = '\x01';
  const std::string bin = dir.write("bin", text);
  const std::string msg = error_message([&] { Corpus::from_files({bin}); });
  EXPECT_TRUE(contains(msg, bin)) << msg;
  EXPECT_TRUE(contains(msg, "11 control bytes")) << msg;
  EXPECT_TRUE(contains(msg, "offset 5")) << msg;

  // Exactly 10 in 100 is still text.
  text[5 + 7 * 10] = 'a';
  EXPECT_EQ(Corpus::from_files({dir.write("ten", text)}).text, text);
  // Whitespace and ESC (fortunes' ANSI colours) are not control bytes here.
  const std::string spaces = "\t\n\r\f\v\x1b[1mbold\x1b[0m\t\n\r\f\v";
  EXPECT_EQ(Corpus::from_files({dir.write("ws", spaces)}).text, spaces);
}

TEST(Corpus, OnlyTheFirst64KiBAreInspected) {
  TempDir dir;
  const std::string text = std::string(64 * 1024, 'a') + std::string(100, '\x01');
  EXPECT_EQ(Corpus::from_files({dir.write("late", text)}).bytes(), text.size());
  // One byte earlier, the NUL is seen.
  std::string nul = text;
  nul[64 * 1024 - 1] = '\0';
  const std::string msg = error_message([&] { Corpus::from_files({dir.write("nul", nul)}); });
  EXPECT_TRUE(contains(msg, "offset 65535")) << msg;
}

TEST(Corpus, DirectoryFilesInNameOrderWithoutDatOrSubdirectories) {
  TempDir dir;
  dir.write("b.txt", "B");
  dir.write("a.txt", "A");
  dir.write("c", "C");
  dir.write("c.dat", std::string("\0\0\0\x02", 4));  // a fortune index: binary, must not be read
  dir.write("sub/d.txt", "D");                       // not recursed into
  const Corpus c = Corpus::from_files({dir.str()});
  EXPECT_EQ(c.text, "ABC");
  EXPECT_EQ(c.files, (std::vector<std::string>{dir / "a.txt", dir / "b.txt", dir / "c"}));
  EXPECT_EQ(c.source, "3 files in " + dir.str());
}

TEST(Corpus, SymbolicLinksToFilesAlreadyReadAreSkipped) {
  TempDir dir, outside;
  dir.write("x", "X");
  fs::create_symlink("x", dir / "x.u8");        // fortunes' layout: sorts after its target
  dir.write("z", "Z");
  fs::create_symlink("z", dir / "a-link-to-z");  // sorts before its target: the real file is kept
  const std::string o = outside.write("o", "O");
  fs::create_symlink(o, dir / "m-outside");     // the only way to reach o: read
  fs::create_symlink(o, dir / "n-outside");     // the second way: skipped
  fs::create_symlink("missing", dir / "dangling");
  const Corpus c = Corpus::from_files({dir.str()});
  EXPECT_EQ(c.text, "OXZ");
  EXPECT_EQ(c.files, (std::vector<std::string>{dir / "m-outside", dir / "x", dir / "z"}));
  // A file already read through another path is not read again.
  const Corpus twice = Corpus::from_files({dir / "x", dir.str()});
  EXPECT_EQ(twice.text, "XOZ");
}

TEST(Corpus, DirectoryWithoutFilesIsNamed) {
  TempDir dir;
  dir.write("only.dat", "index");
  const std::string msg = error_message([&] { Corpus::from_files({dir.str()}); });
  EXPECT_TRUE(contains(msg, "--data '" + dir.str() + "'")) << msg;
  EXPECT_TRUE(contains(msg, "directory")) << msg;
}

TEST(Corpus, LongFileListsAreShortenedInTheSource) {
  TempDir dir;
  std::vector<std::string> paths;
  for (int i = 0; i < 30; ++i) paths.push_back(dir.write("file-with-a-long-name-" + std::to_string(10 + i), "t"));
  const Corpus c = Corpus::from_files(paths);
  EXPECT_EQ(c.files.size(), 30u);
  EXPECT_EQ(c.source.rfind("30 files: " + paths[0] + ", ", 0), 0u) << c.source;
  EXPECT_EQ(c.source.substr(c.source.size() - 5), ", ...") << c.source;
  EXPECT_LT(c.source.size(), 200u) << c.source;
  EXPECT_FALSE(contains(c.source, paths[29])) << c.source;
}

TEST(Corpus, RefusesMoreThanTheLimitBeforeReadingIt) {
  TempDir dir;
  const std::string small = dir.write("small", "s");
  const std::string huge = dir.write("huge", "");
  fs::resize_file(huge, kMaxCorpusBytes);  // sparse: no disk used; with `small` one byte too many
  const std::string msg = error_message([&] { Corpus::from_files({small, huge}); });
  EXPECT_TRUE(contains(msg, "1073741824")) << msg;
  EXPECT_TRUE(contains(msg, huge)) << msg;
  EXPECT_TRUE(contains(msg, "--data")) << msg;
}

TEST(Corpus, DefaultCorpusIsFortunes) {
  std::error_code error;
  if (!fs::is_directory(kDefaultCorpusDir, error))
    GTEST_SKIP() << kDefaultCorpusDir << " is not installed (scripts/setup.sh installs Debian's `fortunes`)";
  const Corpus c = Corpus::default_corpus();
  EXPECT_GT(c.bytes(), 1'000'000u);
  const double h = c.unigram_entropy_nats();
  EXPECT_GT(h, 3.0);
  EXPECT_LT(h, 5.0);
  const std::string prefix = "fortunes (Debian package `fortunes`), " + std::to_string(c.files.size()) + " files in ";
  EXPECT_EQ(c.source, prefix + kDefaultCorpusDir);
  for (const std::string& f : c.files) {
    EXPECT_NE(fs::path(f).extension(), ".dat") << f;
    EXPECT_FALSE(fs::is_symlink(f)) << f;  // every x.u8 links to an x that is read instead
  }
}

}  // namespace
}  // namespace dualpipe::data

TEST(Printable, ControlBytesAndBrokenUtf8AreEscapedTextIsKept) {
  using dualpipe::printable;
  EXPECT_EQ(printable("line one\n\ttabbed"), "line one\n\ttabbed");
  EXPECT_EQ(printable("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x99\x82"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x99\x82");
  // ESC [ 2 J would clear the screen; BEL, NUL, CR and DEL are controls too.
  EXPECT_EQ(printable(std::string("\x1B[2J\x07\r\x7F", 7) + std::string(1, '\0')), "\\x1B[2J\\x07\\x0D\\x7F\\x00");
  // A lone continuation byte, a truncated sequence, an overlong '/', a UTF-16 surrogate and a C1 control: every
  // byte of each is escaped as \xHH.
  const char* const hex = "0123456789ABCDEF";
  for (const std::string broken : {"\x80", "\xE2\x82", "\xC0\xAF", "\xED\xA0\x80", "\xC2\x9B"}) {
    std::string escaped;
    for (const unsigned char byte : broken) escaped += std::string("\\x") + hex[byte >> 4] + hex[byte & 15];
    EXPECT_EQ(printable(broken), escaped);
  }
  EXPECT_EQ(printable("a\\x41"), "a\\\\x41");
}

// Unicode's bidirectional overrides and isolates (the "Trojan Source" characters) reorder what a terminal shows:
// escaped like controls. The one-line form escapes newlines and tabs too; the message form is bounded.
TEST(Printable, BidiOverridesAreEscapedAndOneLineTextEscapesNewlines) {
  using dualpipe::first_unprintable;
  using dualpipe::printable;
  using dualpipe::printable_line;
  EXPECT_EQ(printable("a\xE2\x80\xAE" "b"), "a\\xE2\\x80\\xAE" "b");   // U+202E RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(printable("\xE2\x81\xA6x"), "\\xE2\\x81\\xA6x");      // U+2066 LEFT-TO-RIGHT ISOLATE
  EXPECT_EQ(printable("\xE2\x80\x94"), "\xE2\x80\x94");            // U+2014 EM DASH is text
  EXPECT_EQ(printable_line("two\nlines\tand a tab"), "two\\x0Alines\\x09and a tab");
  EXPECT_EQ(first_unprintable("name"), std::string::npos);
  EXPECT_EQ(first_unprintable("caf\xC3\xA9 \\ ok"), std::string::npos);
  EXPECT_EQ(first_unprintable("ab\x1B[2J"), 2u);
  EXPECT_EQ(first_unprintable("x\xE2\x80\xAE"), 1u);
  EXPECT_EQ(first_unprintable("tab\there"), 3u);
  const std::string long_text(10000, 'a');
  EXPECT_EQ(dualpipe::printable_message(long_text, 100), std::string(100, 'a') + "... (9900 more bytes)");
  EXPECT_EQ(dualpipe::printable_message("\x07short", 100), "\\x07short");
}

// printf into a string of any length: 1e308 in %f is 309 digits, which a fixed buffer cut short.
TEST(Formatted, WritesWhateverLengthTheValuesNeed) {
  const std::string huge = dualpipe::formatted("%.3f|%s", 1e308, "end");
  EXPECT_EQ(huge.size(), 309u + 4 + 4);
  EXPECT_EQ(huge.substr(0, 3), "100");
  EXPECT_EQ(huge.substr(huge.size() - 8), ".000|end");
  EXPECT_EQ(dualpipe::formatted("%d-%s", 7, ""), "7-");
  EXPECT_EQ(dualpipe::fixed(1e308, 1).size(), 311u);
}
