#include "dualpipe/data/corpus.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <set>

#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe::data {
namespace {

namespace fs = std::filesystem;

// A text file has no NUL byte, and at most 10% control bytes besides whitespace and ESC (fortunes use ANSI
// escapes), both in its first kSniffBytes.
constexpr size_t kSniffBytes = 64 * 1024;
// Corpus::source lists file names up to about this many characters.
constexpr size_t kMaxSourceChars = 100;

bool is_control(unsigned char c) {
  return c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' && c != 0x1b;
}

// How errors name a file: users passed --data, or got the default corpus without asking for it.
std::string label(const fs::path& path, bool user) {
  return user ? "--data '" + path.string() + "'" : "'" + path.string() + "' of the default corpus";
}

void check_text(const std::string& name, const std::string& bytes) {
  const size_t sniffed = std::min(bytes.size(), kSniffBytes);
  size_t controls = 0, first_control = std::string::npos;
  for (size_t i = 0; i < sniffed; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    DUALPIPE_REQUIRE(c != 0, name, " is not text: a NUL byte at offset ", i, " (train on plain text files)");
    if (is_control(c)) {
      if (first_control == std::string::npos) first_control = i;
      ++controls;
    }
  }
  DUALPIPE_REQUIRE(controls * 10 <= sniffed, name, " is not text: ", controls,
                   " control bytes in its first ", sniffed, " bytes (at most 10% may be), the first at offset ",
                   first_control, " (train on plain text files)");
}

// The regular files of a directory worth reading, in name order: not fortune's .dat indexes, and not symbolic
// links to files listed already (the fortunes package links every x.u8 to x). Real files are listed before
// links, so a link is the one left out whichever name sorts first.
std::vector<fs::path> files_of(const fs::path& dir, bool user) {
  std::error_code error;
  std::vector<fs::path> entries;
  fs::directory_iterator it(dir, error), end;
  for (; !error && it != end; it.increment(error)) entries.push_back(it->path());
  DUALPIPE_REQUIRE(!error, label(dir, user), " cannot be listed: ", error.message());
  std::sort(entries.begin(), entries.end());

  std::set<fs::path> real_files;
  for (const auto& p : entries)
    if (!fs::is_symlink(p, error) && fs::is_regular_file(p, error) && p.extension() != ".dat")
      real_files.insert(fs::weakly_canonical(p, error));
  std::set<fs::path> links_read;
  std::vector<fs::path> files;
  for (const auto& p : entries) {
    if (!fs::is_regular_file(p, error) || p.extension() == ".dat") continue;  // also dangling links
    if (fs::is_symlink(p, error)) {
      const fs::path target = fs::weakly_canonical(p, error);
      if (real_files.count(target) || !links_read.insert(target).second) continue;
    }
    files.push_back(p);
  }
  return files;
}

// "a.txt"; "12 files in dir"; "3 files: a, b, c"; "40 files: a, b, c, ..." (names up to kMaxSourceChars).
std::string describe(const std::vector<std::string>& paths, const std::vector<std::string>& files) {
  if (files.size() == 1) return files[0];
  std::error_code error;
  if (paths.size() == 1 && fs::is_directory(paths[0], error))
    return std::to_string(files.size()) + " files in " + paths[0];
  std::string source = std::to_string(files.size()) + " files: ";
  const size_t prefix = source.size();
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0 && source.size() + files[i].size() > prefix + kMaxSourceChars) return source + ", ...";
    source += (i > 0 ? ", " : "") + files[i];
  }
  return source;
}

Corpus read_corpus(const std::vector<std::string>& paths, bool user) {
  DUALPIPE_REQUIRE(!paths.empty(), "--data needs at least one file");
  Corpus corpus;
  std::set<fs::path> read;  // canonical paths: a file named twice (or through a link) is read once
  for (const std::string& path : paths) {
    std::error_code error;
    std::vector<fs::path> files;
    if (fs::is_directory(path, error)) {
      files = files_of(path, user);
      DUALPIPE_REQUIRE(!files.empty(), label(path, user), " is a directory without files to read");
    } else {
      require_regular_file(path, label(path, user));  // a FIFO would block, /dev/zero would never end
      files.push_back(path);
    }
    for (const auto& file : files) {
      if (!read.insert(fs::weakly_canonical(file, error)).second) continue;
      const std::string name = label(file, user);
      // Checked before reading, so an enormous file is refused rather than loaded.
      const uintmax_t size = fs::file_size(file, error);
      DUALPIPE_REQUIRE(error || corpus.text.size() + size <= kMaxCorpusBytes, "--data: more than ",
                       kMaxCorpusBytes, " bytes in all with ", name, " (", size,
                       " bytes; every rank holds the corpus in memory)");
      const std::string bytes =
          read_file_within(file.string(), kMaxCorpusBytes - corpus.text.size(), "--data (every rank holds it)");
      DUALPIPE_REQUIRE(!bytes.empty(), name, " is empty");
      check_text(name, bytes);
      corpus.text += bytes;
      corpus.files.push_back(file.string());
    }
  }
  corpus.source = describe(paths, corpus.files);
  return corpus;
}

}  // namespace

Corpus Corpus::from_files(const std::vector<std::string>& paths) { return read_corpus(paths, true); }

Corpus Corpus::default_corpus() {
  std::error_code error;
  const bool present = fs::is_directory(kDefaultCorpusDir, error) && !files_of(kDefaultCorpusDir, false).empty();
  DUALPIPE_REQUIRE(present, "the default corpus ", kDefaultCorpusDir, " is missing: run scripts/setup.sh (it "
                   "installs Debian's `fortunes` package) or train on your own text with --data FILE");
  Corpus corpus = read_corpus({kDefaultCorpusDir}, false);
  corpus.source = "fortunes (Debian package `fortunes`), " + std::to_string(corpus.files.size()) + " files in " +
                  kDefaultCorpusDir;
  return corpus;
}

double Corpus::unigram_entropy_nats() const {
  std::array<uint64_t, 256> counts{};
  for (unsigned char c : text) ++counts[c];
  double entropy = 0;
  for (uint64_t n : counts) {
    if (n == 0) continue;
    const double p = static_cast<double>(n) / static_cast<double>(text.size());
    entropy -= p * std::log(p);
  }
  return entropy;
}

}  // namespace dualpipe::data
