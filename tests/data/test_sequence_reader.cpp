// SequenceReader checked against the token stream itself: the tokens are 0, 1, 2, ... so every row says where
// it was cut from, and a brute-force enumeration of the windows is the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "dualpipe/data/sequence_reader.h"
#include "test_helpers.h"

namespace dualpipe::data {
namespace {

using test::contains;
using test::error_message;

std::vector<int64_t> iota_tokens(int64_t n) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

std::vector<int64_t> row_of(const std::vector<int64_t>& flat, int64_t r, int64_t seq_len) {
  return {flat.begin() + r * seq_len, flat.begin() + (r + 1) * seq_len};
}

// Checks that every row of `batch` is a slice of the stream 0, 1, 2, ... with targets one ahead of inputs, and
// returns the first input of every row (the token the window starts at).
std::vector<int64_t> window_starts(const SequenceBatch& batch) {
  std::vector<int64_t> starts;
  EXPECT_EQ(batch.inputs.size(), static_cast<size_t>(batch.rows * batch.seq_len));
  EXPECT_EQ(batch.targets.size(), static_cast<size_t>(batch.rows * batch.seq_len));
  for (int64_t r = 0; r < batch.rows; ++r) {
    const int64_t s = batch.inputs[r * batch.seq_len];
    for (int64_t k = 0; k < batch.seq_len; ++k) {
      EXPECT_EQ(batch.inputs[r * batch.seq_len + k], s + k) << "row " << r;
      EXPECT_EQ(batch.targets[r * batch.seq_len + k], s + k + 1) << "row " << r;
    }
    starts.push_back(s);
  }
  return starts;
}

// The brute-force reference: every start s of a split [begin, end) such that s - begin is a multiple of seq_len
// and the window [s, s + seq_len + 1) lies inside the split.
std::vector<int64_t> all_window_starts(int64_t begin, int64_t end, int64_t seq_len) {
  std::vector<int64_t> starts;
  for (int64_t s = begin; s + seq_len + 1 <= end; ++s)
    if ((s - begin) % seq_len == 0) starts.push_back(s);
  return starts;
}

// Reads `epochs` epochs in batches of `rows` rows (crossing epoch boundaries inside batches) and returns the
// window starts of each epoch.
std::vector<std::vector<int64_t>> read_epochs(SequenceReader& reader, int epochs, int64_t rows) {
  const int64_t per_epoch = reader.training_windows();
  std::vector<int64_t> starts;
  while (static_cast<int64_t>(starts.size()) < epochs * per_epoch) {
    const std::vector<int64_t> more = window_starts(reader.next(rows));
    starts.insert(starts.end(), more.begin(), more.end());
  }
  std::vector<std::vector<int64_t>> by_epoch;
  for (int e = 0; e < epochs; ++e)
    by_epoch.emplace_back(starts.begin() + e * per_epoch, starts.begin() + (e + 1) * per_epoch);
  return by_epoch;
}

TEST(SequenceReader, HandCountedSmallCase) {
  // 10 tokens, no validation, seq_len 3: windows [0, 4), [3, 7), [6, 10); token 9 is the last target.
  SequenceReader reader(iota_tokens(10), 3, 1, 0.0);
  EXPECT_EQ(reader.seq_len(), 3);
  EXPECT_EQ(reader.training_windows(), 3);
  EXPECT_EQ(reader.validation_windows(), 0);
  const SequenceBatch b = reader.next(3);
  EXPECT_EQ(b.rows, 3);
  EXPECT_EQ(b.seq_len, 3);
  std::set<std::vector<int64_t>> inputs, targets;
  for (int r = 0; r < 3; ++r) inputs.insert(row_of(b.inputs, r, 3)), targets.insert(row_of(b.targets, r, 3));
  EXPECT_EQ(inputs, (std::set<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}));
  EXPECT_EQ(targets, (std::set<std::vector<int64_t>>{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}));
  EXPECT_EQ(reader.validation(4).rows, 0);
  EXPECT_EQ(reader.next(0).rows, 0);
}

TEST(SequenceReader, SplitPointIsTheFloor) {
  // 15 tokens, 10% held out: 13.5 -> the first 13 train (12 windows of seq_len 1), tokens 13 and 14 validate.
  SequenceReader reader(iota_tokens(15), 1, 7);
  EXPECT_EQ(reader.training_windows(), 12);
  EXPECT_EQ(reader.validation_windows(), 1);
  const SequenceBatch v = reader.validation(5);
  EXPECT_EQ(v.rows, 1);
  EXPECT_EQ(v.inputs, std::vector<int64_t>{13});
  EXPECT_EQ(v.targets, std::vector<int64_t>{14});
}

TEST(SequenceReader, EveryTrainingWindowOncePerEpoch) {
  struct Case { int64_t n, seq_len, rows; double fraction; };
  for (const Case& c : {Case{100, 8, 4, 0.1}, Case{100, 8, 5, 0.1}, Case{257, 16, 3, 0.2}, Case{50, 1, 7, 0.0},
                        Case{1000, 31, 64, 0.5}}) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " seq_len=" + std::to_string(c.seq_len));
    SequenceReader reader(iota_tokens(c.n), c.seq_len, 42, c.fraction);
    const auto split = static_cast<int64_t>(std::floor(c.n * (1 - c.fraction)));
    const std::vector<int64_t> expected = all_window_starts(0, split, c.seq_len);
    ASSERT_EQ(reader.training_windows(), static_cast<int64_t>(expected.size()));
    for (std::vector<int64_t> epoch : read_epochs(reader, 3, c.rows)) {
      std::sort(epoch.begin(), epoch.end());
      EXPECT_EQ(epoch, expected);
    }
  }
}

TEST(SequenceReader, NewOrderEveryEpochSameForSameSeed) {
  SequenceReader a(iota_tokens(1000), 10, 5), same(iota_tokens(1000), 10, 5), other(iota_tokens(1000), 10, 6);
  const auto ea = read_epochs(a, 3, 7), esame = read_epochs(same, 3, 11), eother = read_epochs(other, 3, 7);
  EXPECT_EQ(ea, esame);  // the batch size does not change the order
  EXPECT_NE(ea[0], ea[1]);
  EXPECT_NE(ea[1], ea[2]);
  EXPECT_NE(ea[0], eother[0]);
  EXPECT_NE(ea[1], eother[1]);
  EXPECT_NE(ea[0], all_window_starts(0, 900, 10));  // shuffled
}

// The permutations of 10 windows (11 tokens, seq_len 1, no validation) from an independent Python
// transcription of the documented generator (splitmix64; the start is mix(mix(seed) ^ epoch); Fisher-Yates from
// the last element, j uniform in [0, i] by rejecting draws below 2^64 mod (i + 1)):
//   def mix(s): s = (s + 0x9E3779B97F4A7C15) % 2**64; z = s; ... return s, z ^ (z >> 31)
// Pinned so that a checkpoint resumes the same order on any platform and after any refactoring.
TEST(SequenceReader, OrderMatchesTheReferenceGenerator) {
  const std::vector<std::vector<int64_t>> seed0 = {{1, 7, 6, 2, 0, 9, 8, 4, 5, 3}, {7, 9, 6, 8, 1, 5, 0, 4, 3, 2}};
  const std::vector<std::vector<int64_t>> seed42 = {
      {6, 1, 8, 5, 2, 7, 4, 3, 9, 0}, {9, 0, 5, 3, 7, 2, 8, 1, 6, 4}, {1, 0, 7, 9, 4, 3, 6, 2, 5, 8}};
  SequenceReader r0(iota_tokens(11), 1, 0, 0.0), r42(iota_tokens(11), 1, 42, 0.0);
  EXPECT_EQ(read_epochs(r0, 2, 10), seed0);
  EXPECT_EQ(read_epochs(r42, 3, 4), seed42);
}

TEST(SequenceReader, ValidationWindowsAreFixedAndDisjointFromTraining) {
  // 100 tokens: 90 train; validation tokens 90..99 hold (10 - 1) / 4 = 2 windows, [90, 95) and [94, 99).
  SequenceReader reader(iota_tokens(100), 4, 3);
  EXPECT_EQ(reader.validation_windows(), 2);
  const SequenceBatch v = reader.validation(5);
  EXPECT_EQ(v.rows, 2);
  EXPECT_EQ(v.inputs, (std::vector<int64_t>{90, 91, 92, 93, 94, 95, 96, 97}));
  EXPECT_EQ(v.targets, (std::vector<int64_t>{91, 92, 93, 94, 95, 96, 97, 98}));
  EXPECT_EQ(reader.validation(1).inputs, (std::vector<int64_t>{90, 91, 92, 93}));

  for (const auto& epoch : read_epochs(reader, 2, 6)) {
    for (int64_t s : epoch) EXPECT_LT(s + 4, 90) << "a training window reaches token " << s + 4;
  }
  const SequenceBatch again = reader.validation(5);  // unchanged by training reads
  EXPECT_EQ(again.inputs, v.inputs);
  EXPECT_EQ(again.targets, v.targets);
}

// The batches that follow `position` in a reader made fresh and restored.
std::vector<std::vector<int64_t>> batches_after(const ReaderPosition& position, int count, int64_t rows) {
  SequenceReader reader(iota_tokens(100), 8, 9);
  reader.restore(position);
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < count; ++i) {
    const SequenceBatch b = reader.next(rows);
    out.push_back(b.inputs);
    out.push_back(b.targets);
  }
  return out;
}

TEST(SequenceReader, RestoredPositionContinuesBitIdentically) {
  // 100 tokens, seq_len 8: 90 train, (90 - 1) / 8 = 11 windows an epoch.
  SequenceReader reader(iota_tokens(100), 8, 9);
  ASSERT_EQ(reader.training_windows(), 11);
  EXPECT_EQ(reader.position(), (ReaderPosition{0, 0}));
  // Saved after 0, 24, 52, 84, 112 and 136 windows: {0, 0}, {2, 2}, {4, 8}, {7, 7}, {10, 2}, {12, 4}.
  for (int k : {0, 1, 2, 3, 2, 1}) {
    for (int i = 0; i < k; ++i) reader.next(4);
    const ReaderPosition saved = reader.position();
    std::vector<std::vector<int64_t>> following;
    for (int i = 0; i < 5; ++i) {  // 20 windows: always crosses an epoch boundary
      const SequenceBatch b = reader.next(4);
      following.push_back(b.inputs);
      following.push_back(b.targets);
    }
    EXPECT_EQ(batches_after(saved, 5, 4), following) << "epoch " << saved.epoch << " index " << saved.index;
  }
  // 0 + 20 + 4 + 20 + 8 + 20 + 12 + 20 + 8 + 20 + 4 + 20 = 156 windows = 14 epochs of 11 and 2 more.
  EXPECT_EQ(reader.position(), (ReaderPosition{14, 2}));
}

TEST(SequenceReader, PositionAtTheEndOfAnEpoch) {
  SequenceReader reader(iota_tokens(100), 8, 9);
  reader.next(11);
  EXPECT_EQ(reader.position(), (ReaderPosition{0, 11}));
  std::vector<std::vector<int64_t>> following;
  for (int i = 0; i < 3; ++i) {
    const SequenceBatch b = reader.next(3);
    following.push_back(b.inputs);
    following.push_back(b.targets);
  }
  EXPECT_EQ(reader.position(), (ReaderPosition{1, 9}));
  EXPECT_EQ(batches_after({0, 11}, 3, 3), following);
  EXPECT_EQ(batches_after({1, 0}, 3, 3), following);  // the same place, named from the next epoch
}

TEST(SequenceReader, RestoreOutOfRangeThrows) {
  SequenceReader reader(iota_tokens(100), 8, 9);
  const std::string msg = error_message([&] { reader.restore({3, 12}); });
  EXPECT_TRUE(contains(msg, "12")) << msg;
  EXPECT_TRUE(contains(msg, "11 training sequences")) << msg;
  EXPECT_EQ(reader.position(), (ReaderPosition{0, 0}));  // unchanged
  reader.restore({3, 11});                                // the end of epoch 3 is a position
  EXPECT_EQ(reader.position(), (ReaderPosition{3, 11}));
}

TEST(SequenceReader, SequenceLongerThanTheCorpusAllowsThrowsWithTheSizes) {
  // 100 tokens, 10% held out: 90 and 10, so the validation split fits at most 9 tokens a sequence.
  EXPECT_EQ(SequenceReader(iota_tokens(100), 9, 0).validation_windows(), 1);
  const std::string msg = error_message([] { SequenceReader(iota_tokens(100), 10, 0); });
  EXPECT_TRUE(contains(msg, "--seq-len 10")) << msg;
  EXPECT_TRUE(contains(msg, "100")) << msg;
  EXPECT_TRUE(contains(msg, "90 for training and 10 for validation")) << msg;
  EXPECT_TRUE(contains(msg, "at most 9 tokens")) << msg;
  EXPECT_TRUE(contains(msg, "--data")) << msg;

  // Without validation, the whole stream: at most 99.
  EXPECT_EQ(SequenceReader(iota_tokens(100), 99, 0, 0.0).training_windows(), 1);
  const std::string all = error_message([] { SequenceReader(iota_tokens(100), 100, 0, 0.0); });
  EXPECT_TRUE(contains(all, "at most 99 tokens")) << all;

  const std::string none = error_message([] { SequenceReader({}, 1, 0); });
  EXPECT_TRUE(contains(none, "at most 0 tokens")) << none;
}

TEST(SequenceReader, RejectsBadParameters) {
  EXPECT_TRUE(contains(error_message([] { SequenceReader(iota_tokens(100), 0, 0); }), "--seq-len"));
  EXPECT_TRUE(contains(error_message([] { SequenceReader(iota_tokens(100), -3, 0); }), "-3"));
  EXPECT_TRUE(contains(error_message([] { SequenceReader(iota_tokens(100), 4, 0, 0.6); }), "0.6"));
  EXPECT_TRUE(contains(error_message([] { SequenceReader(iota_tokens(100), 4, 0, -0.1); }), "-0.1"));
  error_message([] { SequenceReader(iota_tokens(100), 4, 0, std::numeric_limits<double>::quiet_NaN()); });
  SequenceReader reader(iota_tokens(100), 4, 0);
  EXPECT_TRUE(contains(error_message([&] { reader.next(-1); }), "-1"));
  EXPECT_TRUE(contains(error_message([&] { reader.validation(-1); }), "-1"));
}

}  // namespace
}  // namespace dualpipe::data
