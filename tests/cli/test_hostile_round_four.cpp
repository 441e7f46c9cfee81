// Issue 75's hardening round four: hostile inputs to the surfaces added since round three (schedules that hold
// data-parallel actions, profiler traces of other programs, the re-plan's files), each refused with exit 2 naming the
// value and the rule before any rank starts, or answered whole. Every run is held to 60 s as a guard against hangs;
// the commands that only read files also to 1 GiB of address space.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/run_command.h"

namespace dualpipe::test {
namespace {

class HostileRoundFour : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "dualpipe_round_four_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  // `dualpipe ARGS` in the scratch folder; `bounded`: within 1 GiB of address space (not for train, whose
  // LibTorch maps more at start-up).
  CommandResult dualpipe(const std::string& args, bool bounded = true) {
    return run_command("cd '" + dir_ + "' && " + (bounded ? kAddressLimit : "") + "timeout 60 '" + DUALPIPE_BIN +
                       "' " + args);
  }
  void write(const std::string& name, const std::string& contents) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << contents;
  }
#if defined(__SANITIZE_ADDRESS__)
  static constexpr const char* kAddressLimit = "";
#else
  static constexpr const char* kAddressLimit = "ulimit -v 1048576 && ";
#endif
  std::string dir_;
};

const std::string kTinyTrain =
    "train --steps 1 --layers 2 --hidden 32 --heads 2 --seq-len 16 --eval-every 0 --sample-tokens 0 --trace '' ";

// A schedule file written with --dp and --zero already holds UNSHARD/RESHARD/REDUCE_GRAD. train started every rank,
// each failing in a lowering pass (exit 1), or with --dp 1 trained ignoring them; simulate named the pass.
TEST_F(HostileRoundFour, AScheduleFileThatHoldsDataParallelActionsIsNotGivenThemTwice) {
  ASSERT_EQ(dualpipe("schedule --kind 1f1b -r 2 -m 2 --dp 2 --zero 3 -o z3.txt").status, 0);
  for (const std::string dp : {"--dp 2 --zero 3", "--dp 1"}) {
    const CommandResult run = dualpipe(kTinyTrain + "--schedule-file z3.txt " + dp, false);
    EXPECT_REFUSED(run, "--schedule-file 'z3.txt' holds data-parallel actions (0UNSHARD on rank 0): dualpipe train "
                        "places UNSHARD, RESHARD and REDUCE_GRAD itself from --dp and --zero");
    EXPECT_FALSE(contains(run.out, "dualpipe launch:")) << "ranks were started: " << run.out;
  }
  EXPECT_REFUSED(dualpipe("simulate --from z3.txt --dp 2 --zero 3"),
                 "'z3.txt' already holds its data-parallel actions (0UNSHARD on rank 0): leave --dp and --zero out");
  EXPECT_EQ(dualpipe("simulate --from z3.txt --cost F=1,B=2,unshard=1,reduce=1").status, 0);
}

// The directories a run writes into: a file, the checkpoint directory or another output in their place ended a
// run with exit 1 after it started, and a refused option left them made.
TEST_F(HostileRoundFour, OutputDirectoriesAreCheckedBeforeAnyIsMade) {
  const std::string train = "train --steps 2 --layers 4 --hidden 32 --heads 2 --seq-len 16 --trace '' ";
  write("f", "");
  EXPECT_REFUSED(dualpipe(train + "--kineto-trace f", false), "--kineto-trace 'f' is a file, not a directory");
  EXPECT_REFUSED(dualpipe(train + "--kineto-trace ck --checkpoint-dir ck", false),
                 "--kineto-trace and --checkpoint-dir name the same path 'ck': give each output its own");
  EXPECT_REFUSED(dualpipe(train + "--stall-report-dir sd --kineto-steps 0", false), "--kineto-steps");
  EXPECT_NE(std::system(("test -e '" + dir_ + "/sd'").c_str()), 0) << "a refused run made --stall-report-dir";
}

// A schedule file that breaks a rule of the IR is bad input as any other: exit 2 (it was 1, as for a fault).
TEST_F(HostileRoundFour, AnInvalidScheduleFileEndsTrainWithExitTwo) {
  write("missing.txt", "rank 0: 0F0 0F1 0B0\nrank 1: 1F0 1B0 1F1 1B1\n");
  const CommandResult run = dualpipe(kTinyTrain + "--schedule-file missing.txt", false);
  EXPECT_REFUSED(run, "invalid custom schedule");
  EXPECT_TRUE(contains(run.out, "0B1")) << run.out;
}

// A profiler trace of another program, as torch.profiler writes one: a forward and a backward region, each with
// an operator inside; `head` goes before traceEvents (e.g. a dualpipe record), `event` replaces the first event.
std::string profiler_trace(const std::string& head = "", const std::string& event = "") {
  return "{" + head + R"("traceEvents": [)" +
         (event.empty()
              ? R"({"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 0, "dur": 10})"
              : event) +
         R"(, {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 8},
            {"ph": "X", "cat": "user_annotation", "name": "backward", "pid": 1, "tid": 1, "ts": 20, "dur": 20},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 21, "dur": 18}]})";
}

const std::string kTwoRankRun =
    R"("dualpipe": {"schedule": "rank 0: 0F0 0B0\nrank 1: 1F0 1B0\n", "kind": "1f1b"}, )";

// Traces given together are one run's: one file given twice counted as two ranks, a trace of another program
// joined a dualpipe run's, and one rank's trace of a two-rank run got a symptom ("stage 1 has no forward region").
TEST_F(HostileRoundFour, ProfilerTracesGivenTogetherMustBeOneRunsRanks) {
  write("a.json", profiler_trace());
  ASSERT_EQ(dualpipe("plan --from-kineto a.json").status, 0);
  ASSERT_EQ(std::system(("ln -s a.json '" + dir_ + "/link.json'").c_str()), 0);
  for (const std::string twice : {"a.json a.json", "a.json link.json"})
    EXPECT_REFUSED(dualpipe("plan --from-kineto " + twice), "are the same file: give each rank's trace once");
  write("rank0.json", profiler_trace(kTwoRankRun));
  EXPECT_REFUSED(dualpipe("plan --from-kineto rank0.json a.json"),
                 "profiler trace 'rank0.json' names the schedule its run ran (dualpipe.schedule) but 'a.json' names "
                 "none: they are not one run");
  EXPECT_REFUSED(dualpipe("plan --from-kineto rank0.json"),
                 "the schedule the profiler traces ran (dualpipe.schedule) has 2 ranks, but 1 trace was given");
}

// Fields of the wrong type were skipped as if absent (a numeric dualpipe.schedule: "the traces name no schedule";
// ranks "0" and "0": a plan), a kind with ESC reached the terminal, times of 1e308 us became the costs, and broken
// JSON was named by the library's exception id.
TEST_F(HostileRoundFour, AProfilerTracesFieldsAreOfTheirTypeAndRange) {
  const std::vector<std::pair<std::string, std::string>> traces = {
      {profiler_trace(R"("dualpipe": {"schedule": 12345}, )"), "dualpipe.schedule: expected a string"},
      {profiler_trace(R"("dualpipe": 5, )"), "dualpipe: expected an object"},
      {profiler_trace(R"("distributedInfo": {"rank": "0"}, )"), "distributedInfo.rank: expected an integer"},
      {profiler_trace(R"("dualpipe": {"kind": "dual\u001b[2Jpipe"}, )"),
       "dualpipe.kind: must be at most 64 printable characters on one line, got dual\\x1B[2Jpipe"},
      {profiler_trace(R"("dualpipe": {"host": "box\u001b[2J"}, )"),
       "dualpipe.host: must be at most 64 printable characters on one line, got box\\x1B[2J"},
      {profiler_trace(R"("dualpipe": {"host_cores": 0}, )"),
       "dualpipe.host_cores: must be an integer from 1 to 65536, got 0"},
      {profiler_trace(R"("dualpipe": {"host_cores": 2.5}, )"),
       "dualpipe.host_cores: must be an integer from 1 to 65536, got 2.5"},
      {profiler_trace("", R"({"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 0,
                             "dur": 1e308})"),
       "traceEvents[0].dur: must be at most 8.64e+10 us (a day), got 1e+308"},
      {profiler_trace("", R"({"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1,
                             "ts": -1e300, "dur": 1})"),
       "traceEvents[0].ts: must be within +-1e+17 us"},
      {"", "is not valid JSON: the file is empty"},
      {"  \n", "is not valid JSON: the file holds only white space"},
      {std::string("\x1f\x8b\x08\x00", 4), "is not valid JSON: the file is gzip-compressed: gunzip it first"},
      {std::string("\xff\xfe{\0", 4), "is not valid JSON: the file is UTF-16"},
      {"{\"traceEvents\": [}", "is not valid JSON: parse error at line 1, column 18"}};
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const std::string name = "t" + std::to_string(i) + ".json";
    write(name, traces[i].first);
    const CommandResult run = dualpipe("plan --from-kineto " + name);
    EXPECT_REFUSED(run, "profiler trace '" + name + "'");
    EXPECT_TRUE(contains(run.out, traces[i].second)) << name << ": " << run.out;
    EXPECT_FALSE(contains(run.out, "json.exception")) << run.out;
    EXPECT_FALSE(contains(run.out, "\x1b")) << run.out;
  }
}

// A user's pattern ran on a backtracking engine: '^(a|aa)+$' against one region name of 41 characters took a
// minute, '.*.*z' against one of 4096 ran past 120 s. Both kinds are refused before the trace is read.
TEST_F(HostileRoundFour, NamePatternsThatBacktrackWithoutBoundAreRefused) {
  write("a.json", profiler_trace());
  for (const auto& [pattern, says] : std::vector<std::pair<std::string, std::string>>{
           {"^(a|aa)+$|^forward$", "repeats a group that holds a repetition or an alternative"},
           {"(a+)*", "repeats a group that holds a repetition or an alternative"},
           {".*.*z", "has more than 1 unbounded repetition"}}) {
    EXPECT_REFUSED(dualpipe("plan --from-kineto a.json --forward '" + pattern + "'"),
                   "--forward '" + pattern + "' is refused: it " + says);
    EXPECT_REFUSED(dualpipe("plan --from-kineto a.json --comm-kernel '" + pattern + "'"),
                   "communication pattern (--comm-kernel) '" + pattern + "' is refused: it " + says);
  }
  // What a trace's names need is kept: alternatives, anchors, escapes, a class, one repetition.
  EXPECT_EQ(dualpipe(R"(plan --from-kineto a.json --forward '^(forward|fwd)$|\(F\)$|^stage [0-9]+ f$')").status, 0);
}

// layout --calibrate tried the dualpipe trace reader first and gave its reason ("cannot parse action 'aten::mm'")
// before the profiler reader's for a profiler trace; a loop of links was "neither a file or directory".
TEST_F(HostileRoundFour, CalibratingOnAProfilerTraceGivesTheProfilerReadersReason) {
  write("a.json", profiler_trace());
  const std::string layout = "layout --model llama3-8b --cluster h100-sxmx8 --global-batch 32 --calibrate-mbs 1 ";
  const CommandResult run = dualpipe(layout + "--calibrate a.json");
  EXPECT_REFUSED(run, "--calibrate 'a.json': the run computed at ");  // a CPU's trace against an H100's peak
  EXPECT_FALSE(contains(run.out, "cannot parse action")) << run.out;
  ASSERT_EQ(std::system(("cd '" + dir_ + "' && ln -s loop2.json loop1.json && ln -s loop1.json loop2.json").c_str()),
            0);
  EXPECT_REFUSED(dualpipe(layout + "--calibrate loop1.json"), "--calibrate 'loop1.json' is a loop of symbolic links");
}

// A disk that fills while the ranks save their profiler traces, as a file size limit (writes past it fail as on a
// full disk). LibTorch's save reports no write error: the run ended on an internal check and left *.partial.tmp.
TEST_F(HostileRoundFour, AProfilerTraceCutShortByAFullDiskIsANamedErrorThatLeavesNoPartialFile) {
  const CommandResult run =
      run_command("cd '" + dir_ + "' && trap '' XFSZ && ulimit -f 256 && timeout 120 '" + DUALPIPE_BIN + "' " +
                  kTinyTrain + "--ranks 2 --kind 1f1b --steps 2 --kineto-trace kt");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_TRUE(contains(run.out, "cannot write the profiler trace 'kt/rank0.pt.trace.json'")) << run.out;
  EXPECT_FALSE(contains(run.out, "internal")) << run.out;
  const CommandResult left = run_command("cd '" + dir_ + "/kt' && ls");
  EXPECT_FALSE(contains(left.out, "partial")) << left.out;
  EXPECT_FALSE(contains(left.out, ".tmp")) << left.out;
}

// SIGTERM once `dualpipe train` runs its own code (its option check, a child process, has started): the job ended
// without a word while no rank ran. It says so now, or, where the ranks already run, the launcher stops them
// saying so. (Before main(), while the dynamic loader maps LibTorch, the signal's default action still applies.)
// The check child only exists once the launcher's main() runs: the signal is sent when it appears.
TEST_F(HostileRoundFour, ASigtermBeforeTheRanksRunIsSaid) {
  const CommandResult run = run_command(
      "cd '" + dir_ + "' && { '" + DUALPIPE_BIN + "' " + kTinyTrain +
      "--ranks 2 --kind 1f1b --steps 100000 & P=$!; for i in $(seq 3000); do pgrep -P $P > /dev/null && break; "
      "sleep 0.01; done; kill -TERM $P; wait $P; echo \"exit $?\"; } 2>&1");
  EXPECT_FALSE(contains(run.out, "exit 0")) << run.out;
  EXPECT_TRUE(contains(run.out, "dualpipe train: stopped by SIGTERM while no rank was running") ||
              contains(run.out, "dualpipe launch: got SIGTERM; "))
      << run.out;
}

}  // namespace
}  // namespace dualpipe::test
