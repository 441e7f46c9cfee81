// Fixed-length training sequences from a token stream, in a deterministic shuffled order, with a held-out
// validation split and a position that can be saved and restored exactly (checkpoints).
//
// Splits. Of n tokens, the first split = floor(n (1 - validation_fraction)) train and the remaining n - split
// validate; no window crosses the split, so validation never sees a training token.
//
// Windows. A split of k tokens is cut into (k - 1) / seq_len windows (integer division) of seq_len + 1 tokens
// with stride seq_len: window i covers tokens [i seq_len, i seq_len + seq_len + 1) of its split, so neighbours
// share one token. A window's inputs are its first seq_len tokens and its targets its last seq_len (the next
// token at every position). Every token of [1, windows * seq_len] is a target exactly once per epoch; the
// (k - 1) % seq_len tokens after the last window are not used.
//
// Order. Epoch e hands out every training window exactly once, in a Fisher-Yates permutation driven by a
// splitmix64 generator seeded from (seed, e) alone: the same on every platform and standard library, a new
// one every epoch, so any rank, or a resumed run, reproduces the order from the position without reading
// anything it did not keep. Validation windows are not shuffled.
#pragma once

#include <cstdint>
#include <vector>

namespace dualpipe::data {

struct ReaderPosition {
  uint64_t epoch = 0;
  uint64_t index = 0;  // windows of this epoch already handed out, 0 to training_windows()
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
  // corpus size and the largest sequence length that fits). With validation_fraction 0 there is no validation
  // split and validation() is empty.
  SequenceReader(std::vector<int64_t> tokens, int64_t seq_len, uint64_t seed, double validation_fraction = 0.1);

  // The next `rows` (>= 0) training windows; wraps into the next epoch (a new permutation) as needed, so `rows`
  // may exceed training_windows().
  SequenceBatch next(int64_t rows);
  // The first min(rows, validation_windows()) validation windows (window 0, 1, ...), always the same ones.
  SequenceBatch validation(int64_t rows) const;

  ReaderPosition position() const;
  // Continues from a position() of a reader made with the same tokens, seq_len and seed: the batches that follow
  // are the ones the saved reader would have handed out. Throws InvalidArgument when the index is past the
  // epoch's windows (index == training_windows() is the end of the epoch: the next window opens epoch + 1).
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
