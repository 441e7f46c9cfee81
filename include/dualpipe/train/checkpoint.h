// Sharded training checkpoints on a filesystem every rank sees: DIR/step-N/ holds one shard per stage
// (stage-S.pt: that stage's parameters and optimizer state, written by the rank that holds its first replica)
// or, with expert parallelism over E replicas, one per stage and expert rank (stage-S-ep-K.pt: the stage as
// expert rank K holds it, its dense part and its 1/E of the experts), and manifest.json, which names the step, the model shape, the stage cut, the schedule, the world size, the
// data position and every shard with its size and checksum.
//
// Atomic by construction: shards are written to temporary files and renamed, and the manifest is written the
// same way after every shard is in place. A checkpoint without a manifest is incomplete (a kill mid-write) and
// is skipped; the previous one stays valid. A manifest whose shards do not match their checksums is refused.
// LibTorch-free: the shards' contents are the trainer's business (stage_state.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dualpipe/data/sequence_reader.h"

namespace dualpipe::train {

// FNV-1a, 64 bits: catches truncation and flipped bytes, which is what a checksum here is for.
uint64_t fnv1a64(const std::string& bytes);

struct ShardRecord {
  int stage = 0;
  int expert_rank = -1;  // -1: the whole stage; K >= 0: the stage as expert rank K holds it
  std::string file;  // relative to the step directory
  uint64_t bytes = 0;
  uint64_t checksum = 0;  // fnv1a64
};

// What a run must agree with to load the checkpoint, and where it stopped.
struct CheckpointIdentity {
  int64_t vocab = 0, seq_len = 0, hidden = 0, heads = 0;
  int layers = 0;
  std::string stage_cut;  // "3,4,4,3"
  int world_size = 0;
  int64_t experts = 0;      // per MoE layer; 0: dense
  int expert_parallel = 1;  // E: the shards per stage
};

// The shard file of a stage, as expert rank `expert_rank` holds it (-1: the whole stage).
std::string shard_name(int stage, int expert_rank = -1);

struct CheckpointManifest {
  int step = 0;            // optimizer steps taken
  int planned_steps = 0;   // --steps of the run that wrote it (its learning-rate schedule)
  std::string schedule;    // informational: another schedule with the same cut may load it
  int microbatches = 0;
  int64_t batch = 0;
  uint64_t seed = 0;
  CheckpointIdentity identity;
  data::ReaderPosition data_position;  // after `step` steps
  std::vector<ShardRecord> shards;
};

std::string step_directory(const std::string& dir, int step);

// Creates `dir` (and parents) if needed. Throws InvalidArgument naming it when it is a file or cannot be made.
void prepare_checkpoint_dir(const std::string& dir);

// Writes manifest.json into `step_dir` atomically. Throws InvalidArgument naming the path on failure.
void write_manifest(const std::string& step_dir, const CheckpointManifest& manifest);
// Throws InvalidArgument naming the file and the field for a missing or malformed manifest.
CheckpointManifest read_manifest(const std::string& step_dir);

// The step directory with the highest step that has a manifest; nullopt when there is none. Incomplete ones
// (no manifest) that are newer are listed in `skipped` for the caller to report.
std::optional<std::string> newest_complete_checkpoint(const std::string& dir, std::vector<std::string>* skipped);

// Every shard exists with its recorded size and checksum; throws InvalidArgument naming the shard otherwise.
void verify_shards(const std::string& step_dir, const CheckpointManifest& manifest);
// Throws InvalidArgument naming the first field where `manifest` and `expected` differ.
void check_identity(const std::string& step_dir, const CheckpointIdentity& found, const CheckpointIdentity& expected);

// Removes all but the newest `keep` complete checkpoints and any incomplete ones older than the newest
// complete one (keep = 0: removes nothing).
void prune_checkpoints(const std::string& dir, int keep);

}  // namespace dualpipe::train
