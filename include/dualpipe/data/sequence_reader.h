// Fixed-length training sequences from a token stream, in a deterministic shuffled order, with a held-out
// validation split and a position that can be saved and restored exactly (checkpoints).
//
// The stream is split once: the first floor(n (1 - validation_fraction)) tokens train, the rest validate. Each
// split is cut into windows of seq_len + 1 tokens that start every seq_len tokens (window i covers tokens
// [i seq_len, i seq_len + seq_len + 1) of its split, so neighbours share one token and every token but the
// first is a target once): inputs are a window's first seq_len tokens, targets its last seq_len (the next token
// at every position). A split of k tokens has (k - 1) / seq_len windows. Training windows are visited in a permutation
// drawn from (seed, epoch) alone, a new one every epoch, so any rank, or a resumed run, reproduces the order
// from the position without reading anything it did not keep.
#pragma once

#include <cstdint>
#include <vector>

namespace dualpipe::data {

struct ReaderPosition {
  uint64_t epoch = 0;
  uint64_t index = 0;  // windows of this epoch already handed out
  bool operator==(const ReaderPosition& o) const { return epoch == o.epoch && index == o.index; }
};

// `rows` sequences of `seq_len` tokens, row-major.
struct SequenceBatch {
  int64_t rows = 0, seq_len = 0;
  std::vector<int64_t> inputs, targets;
};

class SequenceReader {
 public:
  // Throws InvalidArgument naming the values when seq_len < 1, validation_fraction is outside [0, 0.5], or a
  // split holds no whole window (the sequence length is longer than the corpus allows; the message names the
  // corpus size and the largest sequence length that fits).
  SequenceReader(std::vector<int64_t> tokens, int64_t seq_len, uint64_t seed, double validation_fraction = 0.1);

  // The next `rows` training windows; wraps into the next epoch (a new permutation) as needed.
  SequenceBatch next(int64_t rows);
  // The first min(rows, validation_windows()) validation windows, always the same ones.
  SequenceBatch validation(int64_t rows) const;

  ReaderPosition position() const;
  // Throws InvalidArgument when the index is past the epoch's windows.
  void restore(const ReaderPosition& position);

  int64_t seq_len() const;
  int64_t training_windows() const;
  int64_t validation_windows() const;

 private:
  SequenceBatch gather(int64_t split_start, const std::vector<int64_t>& windows) const;
  void shuffle_epoch();

  std::vector<int64_t> tokens_;
  int64_t seq_len_;
  uint64_t seed_;
  int64_t split_;  // the first validation token
  int64_t training_windows_, validation_windows_;
  ReaderPosition position_;
  std::vector<int64_t> order_;  // this epoch's permutation of the training windows
};

}  // namespace dualpipe::data
