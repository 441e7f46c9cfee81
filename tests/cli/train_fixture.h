// What the tests of `dualpipe train` share: running the CLI under `timeout` (which stops the launcher, and with it
// every rank, if a run ever hangs), a small model that trains in seconds, the metrics file, and a fixture with a
// scratch directory that skips without the LibTorch runtime or the default corpus.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/free_port.h"
#include "cli/run_command.h"

namespace dualpipe::test {

inline CommandResult dualpipe_cmd(const std::string& args, int limit_seconds = 60) {
  return run_command("timeout -k 5 " + std::to_string(limit_seconds) + " " + std::string(DUALPIPE_BIN) + " " + args);
}

// `dualpipe ARGS` exits 2 naming `message`, before the launcher starts any rank.
inline void expect_refused_before_any_rank_starts(const std::string& args, const std::string& message) {
  const CommandResult run = dualpipe_cmd(args);
  EXPECT_EQ(run.status, 2) << args << "\n" << run.out;
  EXPECT_TRUE(contains(run.out, message)) << args << "\n" << run.out;
  EXPECT_FALSE(contains(run.out, "[rank 0]")) << "a rank started for " << args << "\n" << run.out;
}

// `dualpipe JOB OPTIONS` is refused as in expect_refused_before_any_rank_starts, for each case's OPTIONS.
inline void expect_each_refused_before_any_rank_starts(const std::string& job, const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) expect_refused_before_any_rank_starts(job + c.args, c.says);
}

// `dualpipe ARGS` (a worker's options, with --worker) started by hand as rank 0 of `world_size` ranks, with the
// variables a launcher would set, and no other rank: for the checks a worker makes before it meets the others.
inline CommandResult run_alone_as_rank_zero_of(int world_size, const std::string& args) {
  return run_command("env MASTER_ADDR=127.0.0.1 MASTER_PORT=" + a_free_port(1) + " RANK=0 WORLD_SIZE=" +
                     std::to_string(world_size) + " timeout 30 " + std::string(DUALPIPE_BIN) + " " + args);
}

// A small model, so that each run takes seconds: 8 layers of width 32 over 16-byte sequences of the default
// corpus (Debian's fortunes), 8 micro-batches of 2 sequences.
inline const std::string kSmall =
    "train --layers 8 --hidden 32 --heads 2 --seq-len 16 --batch 2 --warmup 1 --eval-every 4 --sample-tokens 8 "
    "--trace '' ";

struct MetricsFile {
  nlohmann::json config;
  std::vector<nlohmann::json> steps, evals;
  std::vector<nlohmann::json> stragglers, replans;  // --on-straggler's records
  std::vector<nlohmann::json> reference_checks;      // step 1 against the single-process run
  std::vector<nlohmann::json> replicas_identical;    // the end's comparison of replicas
  nlohmann::json state_bytes;                        // after the last step: held and predicted, per rank
};

inline MetricsFile read_metrics(const std::string& path) {
  MetricsFile m;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "config") m.config = j;
    if (j["type"] == "step") m.steps.push_back(j);
    if (j["type"] == "eval") m.evals.push_back(j);
    if (j["type"] == "straggler") m.stragglers.push_back(j);
    if (j["type"] == "replan") m.replans.push_back(j);
    if (j["type"] == "reference_check") m.reference_checks.push_back(j);
    if (j["type"] == "replicas_identical") m.replicas_identical.push_back(j);
    if (j["type"] == "state_bytes") m.state_bytes = j;
  }
  return m;
}

// Every step of `got` agrees with the same step of `expected` in each of `fields` to a relative `tolerance`.
inline void expect_steps_close(const MetricsFile& got, const MetricsFile& expected,
                               const std::vector<std::string>& fields, double tolerance, const std::string& label) {
  ASSERT_EQ(got.steps.size(), expected.steps.size()) << label;
  for (std::size_t i = 0; i < got.steps.size(); ++i)
    for (const std::string& field : fields) {
      const double a = got.steps[i][field], b = expected.steps[i][field];
      EXPECT_LE(std::abs(a - b), tolerance * std::abs(b))
          << label << " step " << i + 1 << " " << field << ": " << a << " vs " << b;
    }
}

// Step i of `got` has the loss and gradient norm of step `offset` + i of `expected`, bit for bit: runs that do the
// same arithmetic in the same order, or a resumed run against the steps it continues.
inline void expect_steps_identical(const MetricsFile& got, const MetricsFile& expected, std::size_t offset,
                                   const std::string& label) {
  ASSERT_LE(offset + got.steps.size(), expected.steps.size()) << label;
  for (std::size_t i = 0; i < got.steps.size(); ++i)
    for (const char* field : {"loss", "grad_norm"})
      EXPECT_EQ(got.steps[i][field], expected.steps[offset + i][field])
          << label << " step " << offset + i + 1 << " " << field;
}

// `m` without its first `n` steps: what a run resumed after step `n` must continue.
inline MetricsFile without_first_steps(MetricsFile m, std::size_t n) {
  m.steps.erase(m.steps.begin(), m.steps.begin() + static_cast<std::ptrdiff_t>(std::min(n, m.steps.size())));
  return m;
}

// Two runs that must train alike up to reduction order: losses within a relative 1e-6 at every step, gradient
// norms within 1e-6 at the first step and 1e-5 after (AdamW's first update moves a weight whose gradient nearly
// cancels by about lr one way or the other, whichever its last bits say: test_tensor_parallel.cpp measures it).
inline void expect_same_training(const MetricsFile& got, const MetricsFile& expected, const std::string& label) {
  expect_steps_close(got, expected, {"loss"}, 1e-6, label);
  ASSERT_EQ(got.steps.size(), expected.steps.size()) << label;
  for (std::size_t i = 0; i < got.steps.size(); ++i) {
    const double a = got.steps[i]["grad_norm"], b = expected.steps[i]["grad_norm"];
    EXPECT_LE(std::abs(a - b), (i == 0 ? 1e-6 : 1e-5) * b) << label << " step " << i + 1 << ": " << a << " vs " << b;
  }
}

// A group's counters (tensor parallelism's collectives, valued at what a ring sends, or the context ring's passes)
// against the count from the model's shape (src/train/stage_traffic.h): rank 0's line of `group` ("tensor-parallel",
// "context-parallel"), to the printed precision.
inline void expect_traffic_as_predicted(const std::string& out, const std::string& label,
                                        const std::string& group = "tensor-parallel") {
  const std::string key = group + " traffic per training step, this rank: ";
  const std::size_t at = out.find(key);
  ASSERT_NE(at, std::string::npos) << label << "\n" << out;
  double sent = 0, predicted = 0;
  ASSERT_EQ(std::sscanf(out.c_str() + at + key.size(), "%lf MiB sent (ring), predicted %lf MiB", &sent, &predicted), 2)
      << out.substr(at, 120);
  EXPECT_GT(sent, 0) << label;
  EXPECT_DOUBLE_EQ(sent, predicted) << label;
}

// A job of `job` (options ending in its layout, e.g. "... --schedule 1f1b --pp 2 --dp 2 -m 4") against its
// reference, one pipeline of `reference` (options giving the same sequences to one replica): both must exit 0, the
// job must pass its own step-1 check against a single-process run and keep its `dp` replicas bit-identical.
// Returns both metrics files (got = the job's), of `steps` steps each, and the job's output; empty files after a
// failed assertion.
struct MetricsPair {
  MetricsFile got, expected;
  std::string output;
};
inline MetricsPair run_beside_one_pipeline(const std::string& job, const std::string& reference, int dp, int steps,
                                           const std::string& dir, int limit_seconds) {
  const std::string got_path = dir + "/layout.jsonl", expected_path = dir + "/one-pipeline.jsonl";
  const CommandResult run = dualpipe_cmd(job + " --metrics " + got_path, limit_seconds);
  EXPECT_EQ(run.status, 0) << job << "\n" << run.out;
  const CommandResult single = dualpipe_cmd(reference + " --metrics " + expected_path, limit_seconds);
  EXPECT_EQ(single.status, 0) << reference << "\n" << single.out;
  if (run.status != 0 || single.status != 0) return {};
  MetricsPair pair{read_metrics(got_path), read_metrics(expected_path), run.out};
  // The run's own records: step 1 checked against one process, and every replica identical to replica 0.
  EXPECT_EQ(pair.got.reference_checks.size(), 1u) << job << "\n" << run.out;
  for (const nlohmann::json& c : pair.got.reference_checks) {
    EXPECT_GT(c["losses"].get<int>(), 0) << job;
    EXPECT_GT(c["gradients"].get<int>(), 0) << job;
    EXPECT_LE(c["worst_cosine_distance"].get<double>(), c["max_cosine_distance"].get<double>()) << job;
  }
  bool replicas_checked = false;
  for (const nlohmann::json& r : pair.got.replicas_identical)
    replicas_checked = replicas_checked || (r["of"] == "data_parallel" && r["replicas"] == dp && r["tensors"] > 0);
  EXPECT_TRUE(replicas_checked) << job << "\n" << run.out;
  EXPECT_EQ(pair.got.steps.size(), static_cast<std::size_t>(steps)) << job;
  EXPECT_EQ(pair.expected.steps.size(), static_cast<std::size_t>(steps)) << reference;
  return pair;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// torchrun of $DUALPIPE_VENV (scripts/env.sh), or of the default environment; empty when neither has one.
inline std::string find_torchrun() {
  const char* venv = std::getenv("DUALPIPE_VENV");
  const char* home = std::getenv("HOME");
  for (const std::string& candidate :
       {venv ? std::string(venv) + "/bin/torchrun" : std::string(),
        home ? std::string(home) + "/.local/share/dualpipe/venv/bin/torchrun" : std::string()})
    if (!candidate.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  return {};
}

// The program torchrun starts as each rank (`torchrun --no-python WORKER OPTIONS`), beside `dualpipe`.
inline std::string worker_binary() {
  const std::string bin = DUALPIPE_BIN;
  return bin.substr(0, bin.rfind('/') + 1) + "dualpipe-train-worker";
}

class Train : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef DUALPIPE_HAS_RUNTIME
    GTEST_SKIP() << "dualpipe was built without the LibTorch runtime (DUALPIPE_WITH_TORCH=OFF)";
#endif
    if (!exists("/usr/share/games/fortunes/fortunes"))
      GTEST_SKIP() << "the default corpus is missing: run scripts/setup.sh (Debian's fortunes package)";
    char pattern[] = "/tmp/dualpipe_train_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) run_command("rm -rf '" + dir_ + "'");
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Trains `job` keeping a checkpoint every 2 steps in NAME/, its metrics in NAME.jsonl; returns the metrics
  // (none after a failed run).
  MetricsFile train_saving_every_two_steps(const std::string& job, const std::string& name, int limit_seconds) const {
    const CommandResult run =
        dualpipe_cmd(job + " --checkpoint-dir " + path(name) + " --save-every 2 --metrics " + path(name) + ".jsonl",
                     limit_seconds);
    EXPECT_EQ(run.status, 0) << job << "\n" << run.out;
    return read_metrics(path(name) + ".jsonl");
  }

  // Resumes `job` from the step-2 checkpoint of the directory `source` (train_saving_every_two_steps), copied
  // alone into NAME/ so that the run cannot pick a later one; returns the metrics of the steps after step 2.
  MetricsFile resume_from_step_two(const std::string& job, const std::string& source, const std::string& name,
                                   int limit_seconds) const {
    const std::string dir = path(name);
    EXPECT_EQ(run_command("mkdir -p '" + dir + "' && cp -r '" + source + "/step-2' '" + dir + "/'").status, 0);
    const CommandResult resumed =
        dualpipe_cmd(job + " --checkpoint-dir " + dir + " --resume --metrics " + dir + ".jsonl", limit_seconds);
    EXPECT_EQ(resumed.status, 0) << job << "\n" << resumed.out;
    EXPECT_TRUE(contains(resumed.out, "after step 2")) << resumed.out;
    return read_metrics(dir + ".jsonl");
  }

  std::string dir_;
};

}  // namespace dualpipe::test
