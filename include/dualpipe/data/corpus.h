// The training text: the user's files, or the default corpus that scripts/setup.sh installs from Debian's
// `fortunes` package (/usr/share/games/fortunes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dualpipe::data {

// Where the default corpus lives once Debian's `fortunes` package is installed.
constexpr const char* kDefaultCorpusDir = "/usr/share/games/fortunes";
// Refused above this many bytes in all (the corpus is held in memory by every rank).
constexpr uint64_t kMaxCorpusBytes = uint64_t{1} << 30;

struct Corpus {
  std::string source;              // for people: "fortunes (Debian package), 64 files in /usr/share/games/fortunes"
  std::vector<std::string> files;  // what was read, in order
  std::string text;                // the files' bytes, concatenated in that order

  // Reads `paths` in order; a directory contributes its regular text files in name order (not recursing,
  // skipping fortune's `.dat` index files and symbolic links to files already read). Throws InvalidArgument
  // naming the path for a missing or unreadable file, an empty file, a binary file (a NUL byte, or many control
  // bytes: names the offset), an empty directory, or more than kMaxCorpusBytes in all.
  static Corpus from_files(const std::vector<std::string>& paths);
  // kDefaultCorpusDir; when it is missing, the error says to run scripts/setup.sh or pass --data FILE.
  static Corpus default_corpus();

  uint64_t bytes() const { return text.size(); }
  // Entropy of the byte frequencies in nats per byte: the loss of a model that predicts every byte from the
  // corpus's byte histogram alone, the baseline a trained language model must beat.
  double unigram_entropy_nats() const;
};

}  // namespace dualpipe::data
