// Issue 27's findings on `dualpipe train` and the files around it, each reproduced as the probe ran it and
// expected to end with exit 2 and a message naming the value and the rule (exit 1 and the reason for a full
// disk), in bounded time, with nothing overwritten or deleted that the run did not create. Every expected
// message is written from the rule it states.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/train_fixture.h"

namespace dualpipe::test {
namespace {

// The probe's `T`: the smallest run, two ranks.
const std::string kT =
    "train --schedule 1f1b --ranks 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 --microbatches 2 --batch 1 "
    "--sample-tokens 0 --eval-every 0 --trace '' ";

class HostileTrain : public Train {
 protected:
  // `dualpipe ARGS` in the scratch folder, 60 s at most.
  CommandResult in_dir(const std::string& args, int limit = 60) {
    return run_command("cd '" + dir_ + "' && timeout -k 5 " + std::to_string(limit) + " " + DUALPIPE_BIN + " " +
                       args);
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(path(name)) << text; }
};

// Finding 1: /dev/zero grew to 2.25 GB; a FIFO blocked forever. Both are refused by their type before a read.
TEST_F(HostileTrain, FilesThatAreNotRegularAreRefusedByTypeBeforeAnyRead) {
  EXPECT_REFUSED(in_dir(kT + "--data /dev/zero --steps 2"),
                 "--data '/dev/zero' is a character device, not a regular file");
  ASSERT_EQ(run_command("mkfifo '" + path("fifo") + "'").status, 0);
  EXPECT_REFUSED(in_dir(kT + "--data fifo --steps 2"), "--data 'fifo' is a FIFO (named pipe), not a regular file");
  EXPECT_REFUSED(in_dir("plot --metrics fifo"), "metrics 'fifo' is a FIFO (named pipe), not a regular file");
  // Other readers of the same class: schedules, traces and layer costs.
  EXPECT_REFUSED(in_dir("schedule --from fifo"), "'fifo' is a FIFO (named pipe), not a regular file");
  EXPECT_REFUSED(in_dir("compare --trace fifo"), "trace file 'fifo' is a FIFO (named pipe), not a regular file");
  EXPECT_REFUSED(in_dir("plan -r 2 -m 4 --layer-costs /dev/zero"), "'/dev/zero' is a character device");
  // Finding 8: a loop of links was "does not exist".
  ASSERT_EQ(run_command("cd '" + dir_ + "' && ln -s loop loop").status, 0);
  EXPECT_REFUSED(in_dir(kT + "--data loop --steps 2"), "--data 'loop' is a loop of symbolic links");
}

// Finding 4: outputs replaced inputs (the training text, a checkpoint shard, the metrics, a trace).
TEST_F(HostileTrain, OutputsThatAreInputsOrEachOtherAreRefusedAndNothingIsWritten) {
  const std::string text = read_file("/usr/share/games/fortunes/fortunes").substr(0, 20000);
  write("f.txt", text);
  EXPECT_REFUSED(in_dir(kT + "--data f.txt --metrics f.txt --steps 2"),
                 "--metrics 'f.txt' is the file of --data 'f.txt', which this command reads");
  EXPECT_EQ(read_file(path("f.txt")), text);
  EXPECT_REFUSED(in_dir(kT + "--data f.txt --metrics x --trace x --steps 2"), "--trace 'x' is also --metrics");
  EXPECT_FALSE(exists(path("x")));
  // Another of the class: an output inside the checkpoint directory (where --keep prunes and shards live).
  ASSERT_EQ(run_command("mkdir '" + path("ck") + "'").status, 0);
  EXPECT_REFUSED(in_dir(kT + "--data f.txt --checkpoint-dir ck --metrics ck/m.jsonl --steps 2"),
                 "--metrics 'ck/m.jsonl' lies inside --checkpoint-dir 'ck'");

  ASSERT_EQ(in_dir(kT + "--data f.txt --steps 1 --trace t.json").status, 0);
  const std::string trace = read_file(path("t.json"));
  EXPECT_REFUSED(in_dir("plan --from-trace t.json -o t.json"), "-o 't.json' is the file of --from-trace 't.json'");
  EXPECT_EQ(read_file(path("t.json")), trace);
  write("t.svg", trace);  // a trace may have any name, a picture's must end in .svg
  EXPECT_REFUSED(in_dir("draw --trace t.svg -o ./t.svg"), "-o './t.svg' is the file of --trace 't.svg'");
  EXPECT_EQ(read_file(path("t.svg")), trace);
}

// Findings 2, 3 and 6 on one run's checkpoint: another run may not start in its directory, a resume must be the
// same run (seed, data, batch, micro-batches) with steps left, and the manifest's numbers are checked.
TEST_F(HostileTrain, CheckpointsOfOneRunAreNeitherMixedWithAnotherNorResumedWrongly) {
  write("f.txt", read_file("/usr/share/games/fortunes/fortunes").substr(0, 20000));
  write("g.txt", read_file("/usr/share/games/fortunes/fortunes").substr(1, 20000));
  const std::string job = kT + "--data f.txt --checkpoint-dir ck ";
  ASSERT_EQ(in_dir(job + "--steps 2 --seed 1").status, 0);
  ASSERT_TRUE(exists(path("ck/step-2/manifest.json")));

  EXPECT_REFUSED(in_dir(job + "--steps 4 --seed 2 --keep 1"),
                 "--checkpoint-dir 'ck' holds the checkpoints of an earlier run (the newest is ck/step-2)");
  EXPECT_TRUE(exists(path("ck/step-2/manifest.json")));
  EXPECT_REFUSED(in_dir(job + "--steps 4 --seed 2 --resume"), "was written with --seed 1, this run has 2");
  EXPECT_REFUSED(in_dir(kT + "--data g.txt --checkpoint-dir ck --steps 4 --seed 1 --resume"),
                 "was written with --data of corpus checksum ");
  EXPECT_REFUSED(in_dir(job + "--steps 4 --seed 1 --batch 2 --resume"),
                 "was written with 2 sequences per step (--dp 1 x --microbatches 2 x --batch 1), this run has 4");
  EXPECT_REFUSED(in_dir(job + "--steps 2 --seed 1 --resume"),
                 "--steps 2 leaves nothing to train after checkpoint ck/step-2 (step 2): give --steps above 2");

  const std::string shard = read_file(path("ck/step-2/stage-0.pt"));
  EXPECT_REFUSED(in_dir(job + "--steps 4 --seed 1 --resume --trace ck/step-2/stage-0.pt"),
                 "--trace 'ck/step-2/stage-0.pt' lies inside --checkpoint-dir 'ck'");
  EXPECT_EQ(read_file(path("ck/step-2/stage-0.pt")), shard);

  // A folder named beyond any step is not a checkpoint (it made --resume fail in std::stoi).
  ASSERT_EQ(run_command("mkdir '" + path("ck/step-9999999999") + "'").status, 0);
  const std::string manifest = read_file(path("ck/step-2/manifest.json"));
  std::string negative = manifest;
  negative.replace(negative.find("\"step\": 2"), 9, "\"step\": -5");
  write("ck/step-2/manifest.json", negative);
  EXPECT_REFUSED(in_dir(job + "--steps 4 --seed 1 --resume"), "'step' is -5, not an integer from 1 to 10000000");
  std::string far = manifest;
  const size_t index = far.find("\"index\": ") + 9;
  far.replace(index, far.find_first_not_of("0123456789", index) - index, "999999999");
  write("ck/step-2/manifest.json", far);
  EXPECT_REFUSED(in_dir(job + "--steps 4 --seed 1 --resume"), "data position 999999999 of epoch 0 is past the ");
  write("ck/step-2/manifest.json", manifest);
  const CommandResult resumed = in_dir(job + "--steps 4 --seed 1 --resume");
  EXPECT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_TRUE(contains(resumed.out, "resumed from ck/step-2 after step 2")) << resumed.out;
}

// Finding 2: two runs saved into one directory and mixed their steps. The second is refused, naming the first.
TEST_F(HostileTrain, ASecondJobInALockedCheckpointDirectoryIsRefusedNamingTheHolder) {
  write("f.txt", read_file("/usr/share/games/fortunes/fortunes").substr(0, 20000));
  const std::string job = kT + "--data f.txt --checkpoint-dir ck ";
  // The first job runs long enough (it saves only at its end); the second tries once rank 0 holds the lock.
  const CommandResult r = run_command(
      "cd '" + dir_ + "' && { timeout -k 5 120 " + DUALPIPE_BIN + " " + job + "--steps 400 > first.out 2>&1 & " +
      "first=$!; for i in $(seq 600); do grep -q 'world rank 0' ck/.lock 2>/dev/null && break; sleep 0.1; done; " +
      "timeout -k 5 60 " + DUALPIPE_BIN + " " + job + "--steps 4; echo \"second: $?\"; kill -TERM $first; " +
      "wait $first; }");
  EXPECT_TRUE(contains(r.out, "second: 2")) << r.out;
  EXPECT_TRUE(contains(r.out, "--checkpoint-dir 'ck' is in use by another job: dualpipe train (world rank 0), pid "))
      << r.out;
}

// Issue 52: a manifest whose shard for stage 1 names stage 0's file (with its size and checksum) passed the checks
// before launch, then rank 1 failed "has no tensor ...". Every tensor the stages load is now looked up before.
TEST_F(HostileTrain, AShardThatDoesNotHoldItsStagesTensorsIsRefusedBeforeLaunching) {
  write("f.txt", read_file("/usr/share/games/fortunes/fortunes").substr(0, 20000));
  const std::string job = kT + "--data f.txt --checkpoint-dir ck --seed 1 ";
  ASSERT_EQ(in_dir(job + "--steps 2").status, 0);
  const std::string original = read_file(path("ck/step-2/manifest.json"));
  const auto with_stage_one = [&](const std::function<void(nlohmann::json&, const nlohmann::json&)>& change) {
    nlohmann::json manifest = nlohmann::json::parse(original);
    nlohmann::json* shards[2] = {};
    for (nlohmann::json& shard : manifest.at("shards")) shards[shard.at("stage").get<int>()] = &shard;
    change(*shards[1], *shards[0]);
    write("ck/step-2/manifest.json", manifest.dump(2));
  };
  const auto sized_as = [](nlohmann::json& shard, const nlohmann::json& other) {
    shard["bytes"] = other.at("bytes"), shard["fnv1a64"] = other.at("fnv1a64");
  };
  with_stage_one([&](nlohmann::json& one, const nlohmann::json& zero) {
    one["file"] = zero.at("file");
    sized_as(one, zero);
  });
  const CommandResult named = in_dir(job + "--steps 4 --resume");
  EXPECT_REFUSED(named, "has no tensor parameter.block1.");
  EXPECT_FALSE(contains(named.out, "[rank ")) << named.out;
  // Variant: stage 1's own file name, stage 0's bytes in it.
  ASSERT_EQ(run_command("cp '" + path("ck/step-2/stage-0.pt") + "' '" + path("ck/step-2/stage-1.pt") + "'").status, 0);
  with_stage_one([&](nlohmann::json& one, const nlohmann::json& zero) { sized_as(one, zero); });
  const CommandResult copied = in_dir(job + "--steps 4 --resume");
  EXPECT_REFUSED(copied, "has no tensor parameter.block1.");
  EXPECT_FALSE(contains(copied.out, "[rank ")) << copied.out;
}

// Issue 52: two jobs started at the same instant into one empty directory both passed the check, and the loser
// launched its ranks before failing "in use by another job" with exit 1. The lock is now taken before launching.
TEST_F(HostileTrain, OfTwoJobsStartedTogetherIntoOneDirectoryTheSecondIsRefusedBeforeLaunching) {
  write("f.txt", read_file("/usr/share/games/fortunes/fortunes").substr(0, 20000));
  const std::string job = std::string(DUALPIPE_BIN) + " " + kT + "--data f.txt --checkpoint-dir ck --steps 400";
  // The first to end is the refused one (the other trains for 400 steps); the other is then stopped. Run by bash:
  // `wait -n` waits for whichever ends first.
  write("race.sh", "timeout -k 5 120 " + job + " > a.out 2>&1 & a=$!\n" +
                       "timeout -k 5 120 " + job + " > b.out 2>&1 & b=$!\n" +
                       "wait -n $a $b; echo \"first to end: $?\"\n"
                       "kill -TERM $a $b 2>/dev/null; wait\n"
                       "grep -l 'in use by another job' a.out b.out | xargs -r cat\n");
  const CommandResult r = run_command("cd '" + dir_ + "' && bash race.sh");
  EXPECT_TRUE(contains(r.out, "first to end: 2")) << r.out;
  EXPECT_TRUE(contains(r.out, "--checkpoint-dir 'ck' is in use by another job: dualpipe train")) << r.out;
  EXPECT_FALSE(contains(r.out, "[rank ")) << "the refused job started ranks:\n" << r.out;
}

// Issue 52: `--pp 2 --dp 65` started 130 local processes of about 470 MB each.
TEST_F(HostileTrain, MoreLocalRanksThanTheBoundAreRefusedBeforeLaunching) {
  EXPECT_REFUSED(in_dir("train --pp 2 --dp 65 --steps 1"),
                 "this machine would run 130 of the 130 ranks (pipeline x data x tensor x context parallel), above "
                 "the limit of 64 ranks per machine");
  EXPECT_REFUSED(in_dir("train --pp 4 --dp 4 --tp 8 --steps 1"), "this machine would run 128 of the 128 ranks");
}

// Finding 2: a read-only directory passed the check and failed at the first save, after the training.
TEST_F(HostileTrain, AReadOnlyCheckpointDirectoryIsRefusedBeforeTraining) {
  ASSERT_EQ(run_command("mkdir -p '" + path("rw") + "' '" + path("ro") + "'").status, 0);
  if (run_command("mount --bind '" + path("rw") + "' '" + path("ro") + "' && mount -o remount,bind,ro '" +
                  path("ro") + "'")
          .status != 0) {
    run_command("umount '" + path("ro") + "' 2>/dev/null");
    GTEST_SKIP() << "cannot make a read-only bind mount here (needs root and mount rights)";
  }
  write("f.txt", read_file("/usr/share/games/fortunes/fortunes").substr(0, 20000));
  const CommandResult r = in_dir(kT + "--data f.txt --checkpoint-dir ro --steps 2");
  run_command("umount '" + path("ro") + "'");
  EXPECT_REFUSED(r, "--checkpoint-dir 'ro' is not writable: Read-only file system");
}

// Finding 6: everything a run printed was lost to a full disk, with exit status 0.
TEST_F(HostileTrain, AFullDiskForStandardOutputFailsTheRunWithTheReason) {
  write("f.txt", read_file("/usr/share/games/fortunes/fortunes").substr(0, 20000));
  for (const std::string& command : {kT + "--data f.txt --steps 1", std::string("launch --nproc 2 -- echo hi")}) {
    const CommandResult r = run_command("cd '" + dir_ + "' && { timeout -k 5 60 " + DUALPIPE_BIN + " " + command +
                                        " > /dev/full; }");
    EXPECT_EQ(r.status, 1) << command << ": " << r.out;
    EXPECT_TRUE(contains(r.out, "cannot write to standard output: No space left on device"))
        << command << ": " << r.out;
  }
}

// Finding 7: rank 1 stopped before the rendezvous; rank 0 said "rank 1 of 2 never arrived", and the launcher,
// parsing that text for older wording, blamed rank 0. The blame now travels in rank 0's exit record.
TEST_F(HostileTrain, TheLauncherBlamesTheRankTheExitRecordNames) {
  const std::string worker = worker_binary();
  const CommandResult r = in_dir(
      "launch --nproc 2 --timeout-grace 1 -- sh -c 'if [ \"$RANK\" = 1 ]; then kill -STOP $$; fi; exec " + worker +
      " --schedule 1f1b --ranks 2 --layers 2 --hidden 16 --heads 2 --seq-len 16 --microbatches 2 --batch 1 "
      "--sample-tokens 0 --eval-every 0 --trace \"\" --steps 1 --timeout 3'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "rank 1 of 2 never arrived")) << r.out;
  EXPECT_TRUE(contains(r.out, "rank 0 exited with status 1 only because of rank 1")) << r.out;
  EXPECT_TRUE(contains(r.out, "rank 1 failed first")) << r.out;
  EXPECT_FALSE(contains(r.out, "dualpipe-exit-record")) << r.out;  // read by the launcher, not relayed
}

// Finding 1: a `kill -TERM` of dualpipe train during its option check left the checker behind (now a fork named
// dualpipe-check: src/train/job_launch.cpp).
TEST_F(HostileTrain, KillingTrainDuringItsCheckLeavesNoCheckerBehind) {
  const CommandResult r = run_command(
      "cd '" + dir_ + "'; " + DUALPIPE_BIN + " " + kT + "--steps 1 > /dev/null 2>&1 & p=$!; c=; " +
      "for i in $(seq 1000); do c=$(pgrep -P $p -x dualpipe-check); [ -n \"$c\" ] && break; " +
      "sleep 0.005; done; " +
      "kill -TERM $p; wait $p; sleep 0.1; " +  // the check itself runs for about a second
      // A zombie is dead (killed, waiting for a reaper that a container's init may never be).
      "s=$(ps -o stat= -p \"${c:-0}\" 2>/dev/null); " +
      "if [ -n \"$s\" ] && [ \"${s#Z}\" = \"$s\" ]; then echo \"orphan $c\"; kill -KILL $c; " +
      "else echo \"checker ${c:-not seen} gone\"; fi");
  EXPECT_FALSE(contains(r.out, "orphan")) << r.out;
  EXPECT_FALSE(contains(r.out, "not seen")) << "the check phase ended before it could be seen: " << r.out;
}

// Finding 5: --hidden 65536 died inside a rank allocating 48 GiB. A model that cannot fit is refused up front.
TEST_F(HostileTrain, AModelLargerThanTheMachinesMemoryIsRefusedBeforeAnyRankStarts) {
  const CommandResult r = in_dir(kT + "--hidden 65536 --heads 1 --steps 1");
  EXPECT_REFUSED(r, "million parameters: its weights, gradients and AdamW state");
  EXPECT_TRUE(contains(r.out, "above this machine's")) << r.out;
  EXPECT_FALSE(contains(r.out, "[rank ")) << r.out;  // no rank started
}

// Finding 8: messages that named the wrong thing or not the reason.
TEST_F(HostileTrain, MessagesNameWhatWasAskedForAndTheSystemsReason) {
  const CommandResult world = in_dir("train --schedule 1f1b --pp 64 --dp 64 -m 64 --layers 64");
  EXPECT_REFUSED(world, "a world of 4096 ranks on --nnodes 1 puts 4096 ranks on each machine, above the limit of");
  EXPECT_FALSE(contains(world.out, "--nproc-per-node")) << world.out;

  ASSERT_EQ(run_command("mkdir -p '" + path("tiny") + "'").status, 0);
  if (run_command("mount -t tmpfs -o size=16k tmpfs '" + path("tiny") + "'").status != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root and mount rights)";
  const CommandResult full = in_dir("draw -k 1f1b -r 8 -m 64 -o tiny/p.svg");
  run_command("umount '" + path("tiny") + "'");
  EXPECT_REFUSED(full, "cannot write 'tiny/p.svg': No space left on device");
}

}  // namespace
}  // namespace dualpipe::test
