#include "dualpipe/data/sequence_reader.h"

#include <algorithm>
#include <cmath>

#include "dualpipe/util/error.h"

namespace dualpipe::data {
namespace {

// splitmix64: the same numbers on every platform and standard library, unlike std::shuffle's distributions.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias: draws below 2^64 mod bound are redrawn.
uint64_t uniform_below(uint64_t& state, uint64_t bound) {
  const uint64_t reject_below = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = next_random(state);
    if (r >= reject_below) return r % bound;
  }
}

}  // namespace

SequenceReader::SequenceReader(std::vector<int64_t> tokens, int64_t seq_len, uint64_t seed,
                               double validation_fraction)
    : tokens_(std::move(tokens)), seq_len_(seq_len), seed_(seed) {
  DUALPIPE_REQUIRE(seq_len >= 1, "--seq-len must be at least 1, got ", seq_len);
  DUALPIPE_REQUIRE(validation_fraction >= 0 && validation_fraction <= 0.5,
                   "the validation share must be between 0 and 0.5, got ", validation_fraction);
  const int64_t n = static_cast<int64_t>(tokens_.size());
  split_ = static_cast<int64_t>(std::floor(static_cast<double>(n) * (1 - validation_fraction)));
  training_windows_ = split_ > 0 ? (split_ - 1) / seq_len : 0;
  validation_windows_ = n - split_ > 0 ? (n - split_ - 1) / seq_len : 0;
  // Each split needs one window of seq_len + 1 tokens (no validation split when the fraction is 0).
  const bool validates = validation_fraction > 0;
  const int64_t fits = std::max<int64_t>((validates ? std::min(split_, n - split_) : split_) - 1, 0);
  DUALPIPE_REQUIRE(training_windows_ >= 1 && (!validates || validation_windows_ >= 1), "--seq-len ", seq_len,
                   " is longer than the corpus allows: its ", n, " tokens (bytes) split into ", split_,
                   " for training and ", n - split_, " for validation, so at most ", fits,
                   " tokens fit in a sequence (use a shorter --seq-len or more --data)");
  shuffle_epoch();
}

void SequenceReader::shuffle_epoch() {
  order_.resize(static_cast<size_t>(training_windows_));
  for (int64_t i = 0; i < training_windows_; ++i) order_[i] = i;
  // Fisher-Yates driven by splitmix64 from a hash of (seed, epoch): the same permutation everywhere.
  // Both mixes are bijections, so a seed gives a different start for every epoch and an epoch for every seed.
  uint64_t seed_state = seed_;
  uint64_t state = next_random(seed_state) ^ position_.epoch;
  state = next_random(state);
  for (int64_t i = training_windows_ - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(uniform_below(state, static_cast<uint64_t>(i + 1)));
    std::swap(order_[i], order_[j]);
  }
}

SequenceBatch SequenceReader::gather(int64_t split_start, const std::vector<int64_t>& windows) const {
  SequenceBatch batch;
  batch.rows = static_cast<int64_t>(windows.size());
  batch.seq_len = seq_len_;
  for (int64_t w : windows) {
    const auto first = tokens_.begin() + split_start + w * seq_len_;
    batch.inputs.insert(batch.inputs.end(), first, first + seq_len_);
    batch.targets.insert(batch.targets.end(), first + 1, first + seq_len_ + 1);
  }
  return batch;
}

SequenceBatch SequenceReader::next(int64_t rows) {
  DUALPIPE_REQUIRE(rows >= 0, "a batch needs 0 or more rows, got ", rows);
  std::vector<int64_t> windows;
  for (int64_t r = 0; r < rows; ++r) {
    if (position_.index == static_cast<uint64_t>(training_windows_)) {
      ++position_.epoch;
      position_.index = 0;
      shuffle_epoch();
    }
    windows.push_back(order_[position_.index++]);
  }
  return gather(0, windows);
}

SequenceBatch SequenceReader::validation(int64_t rows) const {
  DUALPIPE_REQUIRE(rows >= 0, "a validation batch needs 0 or more rows, got ", rows);
  std::vector<int64_t> windows;
  for (int64_t w = 0; w < std::min(rows, validation_windows_); ++w) windows.push_back(w);
  return gather(split_, windows);
}

ReaderPosition SequenceReader::position() const { return position_; }

void SequenceReader::restore(const ReaderPosition& position) {
  DUALPIPE_REQUIRE(position.index <= static_cast<uint64_t>(training_windows_), "data position ", position.index,
                   " of epoch ", position.epoch, " is past the ", training_windows_,
                   " training sequences of an epoch (saved with another corpus or --seq-len?)");
  position_ = position;
  shuffle_epoch();
}

int64_t SequenceReader::seq_len() const { return seq_len_; }
int64_t SequenceReader::training_windows() const { return training_windows_; }
int64_t SequenceReader::validation_windows() const { return validation_windows_; }

}  // namespace dualpipe::data
