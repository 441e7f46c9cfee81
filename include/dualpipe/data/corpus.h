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
  // For people: "fortunes (Debian package `fortunes`), 64 files in /usr/share/games/fortunes" for the default;
  // for --data, the file ("a.txt"), the directory ("12 files in texts"), or "3 files: a, b, c" (long lists end
  // in ", ...").
  std::string source;
  std::vector<std::string> files;  // what was read, in order
  std::string text;                // the files' bytes, concatenated in that order

  // Reads `paths` in order; a directory contributes its regular files in name order (not recursing, skipping
  // fortune's `.dat` index files and symbolic links to files it holds or already read: the fortunes package
  // links every x.u8 to x). A file reached twice is read once. Throws InvalidArgument naming the path for a
  // missing or unreadable file, an empty file, a binary file (a NUL byte, or more than 10% control bytes other
  // than \t \n \r \f \v and ESC, in the first 64 KiB: names the first offset), a directory without files,
  // or more than kMaxCorpusBytes in all.
  static Corpus from_files(const std::vector<std::string>& paths);
  // kDefaultCorpusDir; when it is missing or empty, the error says to run scripts/setup.sh or pass --data FILE.
  static Corpus default_corpus();

  uint64_t bytes() const { return text.size(); }
  // Entropy of the byte frequencies in nats per byte, -sum p ln p (0 for an empty text): the loss of a model
  // that predicts every byte from the corpus's byte histogram alone, the baseline a trained language model
  // must beat.
  double unigram_entropy_nats() const;
};

}  // namespace dualpipe::data
