// The checkpoint directory's files (checkpoint.h) against hand-made directories: the newest complete checkpoint
// is found, damaged shards and hostile manifests are refused by name before anything large is read, --keep
// prunes only its own run's checkpoints, and a second job cannot take a locked directory.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "dualpipe/train/checkpoint.h"
#include "dualpipe/util/directory_lock.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {
namespace {

namespace fs = std::filesystem;

// What `call` was refused with: the message of the InvalidArgument it threw, or "accepted" (what no message says)
// when it returned.
template <typename Call>
std::string refusal_message(Call call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

class Checkpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dualpipe_ckpt_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A complete checkpoint of `step` by `run` with one shard holding `payload`.
  void write(int step, const std::string& payload, bool manifest = true, const std::string& run = "run-a") {
    const std::string d = step_directory(dir_, step);
    fs::create_directories(d);
    mark_step_directory(d, run);
    std::ofstream(d + "/stage-0.pt", std::ios::binary) << payload;
    CheckpointManifest m;
    m.run = run;
    m.step = step;
    m.planned_steps = 100;
    m.identity = identity;
    m.shards.push_back({0, -1, "stage-0.pt", payload.size(), fnv1a64(payload), tensors});
    if (manifest) write_manifest(d, m);
  }
  // Replaces `from` by `to` in the manifest of `step` (which must contain it once).
  void edit_manifest(int step, const std::string& from, const std::string& to) {
    const std::string path = step_directory(dir_, step) + "/manifest.json";
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << text;
    text.replace(at, from.size(), to);
    std::ofstream(path, std::ios::trunc) << text;
  }
  std::string refusal(int step) {
    return refusal_message([&] { read_manifest(step_directory(dir_, step)); });
  }
  std::string dir_;
  CheckpointIdentity identity{256, 16, 32, 2, 8, "8", 4, 0, 1, 7, 4, 2, 1000, 0x1234};  // one stage
  std::vector<TensorRecord> tensors;  // what write()'s shard lists (none: an older writer's manifest)
};

TEST_F(Checkpoints, TheNewestCompleteOneIsFoundAndIncompleteOnesAreReported) {
  write(2, "two");
  write(10, "ten");
  write(12, "twelve", /*manifest=*/false);
  std::vector<std::string> skipped;
  EXPECT_EQ(newest_complete_checkpoint(dir_, &skipped), step_directory(dir_, 10));
  EXPECT_EQ(skipped, std::vector<std::string>{step_directory(dir_, 12)});
  const CheckpointManifest m = read_manifest(step_directory(dir_, 10));
  EXPECT_EQ(m.step, 10);
  EXPECT_EQ(m.run, "run-a");
  EXPECT_NO_THROW(verify_shards(step_directory(dir_, 10), m));
  EXPECT_NO_THROW(check_identity("x", m.identity, identity));
}

TEST_F(Checkpoints, AFlippedByteATruncationAndAnotherShapeAreRefused) {
  write(4, "0123456789");
  const std::string d = step_directory(dir_, 4);
  const CheckpointManifest m = read_manifest(d);
  std::ofstream(d + "/stage-0.pt", std::ios::binary | std::ios::trunc) << "0123456788";
  EXPECT_THROW(verify_shards(d, m), InvalidArgument);
  std::ofstream(d + "/stage-0.pt", std::ios::binary | std::ios::trunc) << "012345678";
  EXPECT_THROW(verify_shards(d, m), InvalidArgument);
  CheckpointIdentity other = identity;
  other.world_size = 2;
  const std::string world = refusal_message([&] { check_identity(d, m.identity, other); });
  EXPECT_NE(world.find("world size (--ranks) 4, this run has 2"), std::string::npos) << world;
}

TEST_F(Checkpoints, AnotherSeedBatchOrCorpusIsRefusedByName) {
  write(4, "x");
  const CheckpointManifest m = read_manifest(step_directory(dir_, 4));
  auto refusal_of = [&](const CheckpointIdentity& other) {
    return refusal_message([&] { check_identity("ckpt", m.identity, other); });
  };
  CheckpointIdentity seed = identity, batch = identity, microbatches = identity, data = identity;
  seed.seed = 8;
  batch.batch = 3;
  microbatches.microbatches = 8;
  data.data_checksum = 0x1235;
  EXPECT_NE(refusal_of(seed).find("--seed 7, this run has 8"), std::string::npos) << refusal_of(seed);
  EXPECT_NE(refusal_of(batch).find("--batch 2, this run has 3"), std::string::npos) << refusal_of(batch);
  EXPECT_NE(refusal_of(microbatches).find("--microbatches 4, this run has 8"), std::string::npos);
  EXPECT_NE(refusal_of(data).find("--data of corpus checksum 0000000000001234, this run has 0000000000001235"),
            std::string::npos)
      << refusal_of(data);
}

// Issue 27: numbers of a manifest are not trusted: a negative or overflowing step, a fractional or huge byte
// count, a world size beyond int are refused naming the field, not converted into nonsense.
TEST_F(Checkpoints, OutOfRangeManifestNumbersAreRefusedNamingTheField) {
  write(4, "x");
  edit_manifest(4, "\"step\": 4", "\"step\": -5");
  EXPECT_NE(refusal(4).find("'step' is -5, not an integer from 1 to 10000000"), std::string::npos) << refusal(4);
  edit_manifest(4, "\"step\": -5", "\"step\": 2147483647");
  EXPECT_NE(refusal(4).find("'step' is 2147483647, not an integer from 1"), std::string::npos) << refusal(4);
  edit_manifest(4, "\"step\": 2147483647", "\"step\": 4");
  edit_manifest(4, "\"world_size\": 4", "\"world_size\": 1e20");
  EXPECT_NE(refusal(4).find("'world_size' is 1e+20, not an integer"), std::string::npos) << refusal(4);
  edit_manifest(4, "\"world_size\": 1e20", "\"world_size\": 4");
  edit_manifest(4, "\"bytes\": 1,", "\"bytes\": 1e300,");
  EXPECT_NE(refusal(4).find("'bytes' is 1e+300, not an integer"), std::string::npos) << refusal(4);
  edit_manifest(4, "\"bytes\": 1e300,", "\"bytes\": 1.5,");
  EXPECT_NE(refusal(4).find("'bytes' is 1.5, not an integer"), std::string::npos) << refusal(4);
  edit_manifest(4, "\"bytes\": 1.5,", "\"bytes\": 1,");
  EXPECT_EQ(refusal(4), "accepted");
}

// Issue 27: a shard for a stage outside the cut failed inside a rank; it is refused with the manifest.
TEST_F(Checkpoints, AShardOutsideTheStageCutOrMissingIsRefused) {
  write(2, "x");
  const std::string d = step_directory(dir_, 2);
  edit_manifest(2, "\"stage\": 0", "\"stage\": 7");
  const std::string outside = refusal_message([&] { verify_shards(d, read_manifest(d)); });
  EXPECT_NE(outside.find("shard stage-0.pt is for stage 7, outside its stage cut 8 (1 stages)"), std::string::npos)
      << outside;
  CheckpointManifest two_stages = read_manifest(d);
  two_stages.identity.stage_cut = "4,4";
  two_stages.shards[0].stage = 0;
  EXPECT_THROW(verify_shards(d, two_stages), InvalidArgument);  // stage 1 has no shard
}

// A manifest with 'data_parallel' lists each shard's logical tensors and may be resumed on any layout: the stage
// cut, the ranks, --ep and how the sequences of a step are split may change, their number may not.
TEST_F(Checkpoints, ALayoutFreeCheckpointListsItsTensorsAndNeedsOnlyTheModelDataAndSequencesPerStep) {
  identity.data_parallel = 1;
  tensors = {{"block0.qkv.weight", {96, 32}}, {"block0.moe.expert3.fc1.bias", {128}}};
  write(4, "x");
  const std::string d = step_directory(dir_, 4);
  const CheckpointManifest m = read_manifest(d);
  ASSERT_EQ(m.shards.size(), 1u);
  ASSERT_EQ(m.shards[0].tensors.size(), 2u);
  EXPECT_EQ(m.shards[0].tensors[0].name, "block0.moe.expert3.fc1.bias");  // listed by name
  EXPECT_EQ(m.shards[0].tensors[0].shape, std::vector<int64_t>{128});
  EXPECT_EQ(m.shards[0].tensors[1].name, "block0.qkv.weight");
  EXPECT_EQ(m.shards[0].tensors[1].shape, (std::vector<int64_t>{96, 32}));
  EXPECT_TRUE(m.identity.layout_free());

  CheckpointIdentity other_layout = identity;  // PP 2 x DP 2 x EP 2, half the micro-batches: 8 sequences a step
  other_layout.world_size = 2;
  other_layout.stage_cut = "4,4";
  other_layout.expert_parallel = 2;
  other_layout.data_parallel = 2;
  other_layout.microbatches = 2;
  EXPECT_NO_THROW(check_identity(d, m.identity, other_layout));
  CheckpointIdentity more_sequences = other_layout;
  more_sequences.microbatches = 4;
  const std::string sequences = refusal_message([&] { check_identity(d, m.identity, more_sequences); });
  EXPECT_NE(sequences.find("written with 8 sequences per step (--dp 1 x --microbatches 4 x --batch 2), "
                           "this run has 16 sequences per step (--dp 2 x --microbatches 4 x --batch 2)"),
            std::string::npos)
      << sequences;
  CheckpointIdentity wider = other_layout;
  wider.hidden = 64;
  EXPECT_THROW(check_identity(d, m.identity, wider), InvalidArgument);

  edit_manifest(4, "96,", "-96,");
  EXPECT_NE(refusal(4).find("the shape of tensor 'block0.qkv.weight' in shard stage-0.pt has size -96"),
            std::string::npos)
      << refusal(4);
  tensors.clear();
  write(6, "y");
  EXPECT_NE(refusal(6).find("shard stage-0.pt lists no tensors"), std::string::npos) << refusal(6);
}

// Issue 27: a shard made sparse to 8 GiB is refused by its size, before a byte of it is read.
TEST_F(Checkpoints, AShardLargerThanItsManifestSaysIsRefusedBeforeItIsRead) {
  write(2, "payload");
  const std::string d = step_directory(dir_, 2);
  fs::resize_file(d + "/stage-0.pt", uint64_t{8} << 30);
  const std::string sparse = refusal_message([&] { verify_shards(d, read_manifest(d)); });
  EXPECT_NE(sparse.find("has 8589934592 bytes, its manifest says 7"), std::string::npos) << sparse;
}

// Issue 27: a step folder whose number does not fit is not a checkpoint (it made std::stoi throw).
TEST_F(Checkpoints, StepFoldersBeyondTheStepLimitAreNotCheckpoints) {
  write(2, "two");
  fs::create_directories(dir_ + "/step-9999999999");
  fs::create_directories(dir_ + "/step-99999999");
  EXPECT_EQ(newest_complete_checkpoint(dir_, nullptr), step_directory(dir_, 2));
  EXPECT_NO_THROW(prune_checkpoints(dir_, 1, "run-a"));
  EXPECT_TRUE(fs::exists(dir_ + "/step-9999999999"));
}

TEST_F(Checkpoints, KeepPrunesTheOldestCompleteOnesOfItsOwnRun) {
  for (int step : {2, 4, 6, 8}) write(step, "x");
  write(10, "partial", false);
  prune_checkpoints(dir_, 2, "run-a");
  for (int step : {2, 4}) EXPECT_FALSE(fs::exists(step_directory(dir_, step))) << step;
  for (int step : {6, 8, 10}) EXPECT_TRUE(fs::exists(step_directory(dir_, step))) << step;
}

// Issue 27's example: run b with --keep 1 in run a's directory deleted a's checkpoints. Now only b's own go,
// a leftover of b's killed save older than its newest included, and nothing of a's or of an unknown writer.
TEST_F(Checkpoints, KeepNeverDeletesAnotherRunsCheckpoints) {
  write(2, "a2", true, "run-a");
  write(4, "a4", true, "run-a");
  write(3, "b3-killed", false, "run-b");
  write(5, "b5", true, "run-b");
  write(6, "b6", true, "run-b");
  fs::create_directories(step_directory(dir_, 1));  // no mark, no manifest: whose is unknown
  prune_checkpoints(dir_, 1, "run-b");
  for (int step : {1, 2, 4, 6}) EXPECT_TRUE(fs::exists(step_directory(dir_, step))) << step;
  for (int step : {3, 5}) EXPECT_FALSE(fs::exists(step_directory(dir_, step))) << step;
  // A save may replace its own run's checkpoints, incomplete leftovers and absent ones, never another run's.
  EXPECT_TRUE(step_directory_is_replaceable(step_directory(dir_, 6), "run-b"));
  EXPECT_FALSE(step_directory_is_replaceable(step_directory(dir_, 4), "run-b"));
  EXPECT_TRUE(step_directory_is_replaceable(step_directory(dir_, 1), "run-b"));
  EXPECT_TRUE(step_directory_is_replaceable(step_directory(dir_, 99), "run-b"));
}

TEST_F(Checkpoints, ACheckpointDirThatIsAFileIsRefused) {
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "x";
  EXPECT_THROW(prepare_checkpoint_dir(file), InvalidArgument);
}

// Two jobs in one directory: the second is refused naming the first (a process of its own, as a job is).
TEST_F(Checkpoints, ALockedDirectoryIsRefusedNamingItsHolderAndFreedWhenTheHolderDies) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    DirectoryLock lock(dir_, "--checkpoint-dir", "the first job");
    (void)!::write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  try {
    DirectoryLock second(dir_, "--checkpoint-dir", "the second job");
    FAIL() << "took a held lock";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("is in use by another job: the first job, pid " + std::to_string(holder)),
              std::string::npos)
        << message;
  }
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_NO_THROW(DirectoryLock(dir_, "--checkpoint-dir", "the second job"));
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace dualpipe::train
