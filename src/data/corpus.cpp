#include "dualpipe/data/corpus.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "dualpipe/error.h"

namespace dualpipe::data {
namespace {

namespace fs = std::filesystem;

// A text file has no NUL byte, and few control bytes besides whitespace and ESC (fortunes use ANSI escapes).
constexpr size_t kSniffBytes = 64 * 1024;
constexpr double kMaxControlShare = 0.10;

bool is_control(unsigned char c) {
  return c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' && c != 0x1b;
}

void check_text(const std::string& path, const std::string& bytes) {
  const size_t sniffed = std::min(bytes.size(), kSniffBytes);
  size_t controls = 0, first_control = std::string::npos;
  for (size_t i = 0; i < sniffed; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    DUALPIPE_REQUIRE(c != 0, "--data '", path, "' is not text: a NUL byte at offset ", i,
                     " (train on plain text files)");
    if (is_control(c)) {
      if (first_control == std::string::npos) first_control = i;
      ++controls;
    }
  }
  DUALPIPE_REQUIRE(controls <= kMaxControlShare * sniffed, "--data '", path, "' is not text: ", controls,
                   " control bytes in its first ", sniffed, " bytes, the first at offset ", first_control,
                   " (train on plain text files)");
}

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  DUALPIPE_REQUIRE(in, "--data '", path.string(), "' cannot be read");
  std::ostringstream out;
  out << in.rdbuf();
  DUALPIPE_REQUIRE(!in.bad(), "--data '", path.string(), "': read failed");
  return out.str();
}

// The regular files of a directory worth reading, in name order: not fortune's .dat indexes, and not links to
// files already listed (the fortunes package links every x.u8 to x).
std::vector<fs::path> files_of(const fs::path& dir) {
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  std::set<fs::path> seen;
  std::vector<fs::path> files;
  for (const auto& p : entries) {
    std::error_code error;
    if (!fs::is_regular_file(p, error) || p.extension() == ".dat") continue;
    const fs::path target = fs::weakly_canonical(p, error);
    if (!seen.insert(error ? p : target).second) continue;
    files.push_back(p);
  }
  return files;
}

}  // namespace

Corpus Corpus::from_files(const std::vector<std::string>& paths) {
  DUALPIPE_REQUIRE(!paths.empty(), "--data needs at least one file");
  Corpus corpus;
  std::set<fs::path> read;
  for (const std::string& path : paths) {
    std::error_code error;
    DUALPIPE_REQUIRE(fs::exists(path, error), "--data '", path, "' does not exist");
    std::vector<fs::path> files;
    if (fs::is_directory(path, error)) {
      files = files_of(path);
      DUALPIPE_REQUIRE(!files.empty(), "--data '", path, "' is a directory without text files");
    } else {
      files.push_back(path);
    }
    for (const auto& file : files) {
      if (!read.insert(fs::weakly_canonical(file, error)).second) continue;
      const std::string bytes = read_whole(file);
      DUALPIPE_REQUIRE(!bytes.empty(), "--data '", file.string(), "' is empty");
      check_text(file.string(), bytes);
      DUALPIPE_REQUIRE(corpus.text.size() + bytes.size() <= kMaxCorpusBytes, "--data: more than ", kMaxCorpusBytes,
                       " bytes in all at '", file.string(), "' (every rank holds the corpus in memory)");
      corpus.text += bytes;
      corpus.files.push_back(file.string());
    }
  }
  if (corpus.files.size() == 1) {
    corpus.source = corpus.files[0];
  } else {
    corpus.source = std::to_string(corpus.files.size()) + " files (" + corpus.files[0] + ", ...)";
  }
  return corpus;
}

Corpus Corpus::default_corpus() {
  std::error_code error;
  const bool present = fs::is_directory(kDefaultCorpusDir, error) && !files_of(kDefaultCorpusDir).empty();
  DUALPIPE_REQUIRE(present, "the default corpus ", kDefaultCorpusDir, " is missing: run scripts/setup.sh (it "
                   "installs Debian's `fortunes` package) or train on your own text with --data FILE");
  Corpus corpus = from_files({kDefaultCorpusDir});
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
    const double p = static_cast<double>(n) / text.size();
    entropy -= p * std::log(p);
  }
  return entropy;
}

}  // namespace dualpipe::data
