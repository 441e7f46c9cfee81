// Sharded training checkpoints on a filesystem every rank sees: DIR/step-N/ holds one shard per stage
// (stage-S.pt: that stage's parameters and optimizer state, written by the rank that holds its first replica)
// or, with expert parallelism over E replicas, one per stage and expert rank (stage-S-ep-K.pt: the stage as
// expert rank K holds it, its dense part and its 1/E of the experts), written in parallel by their ranks, and
// manifest.json, which names the step, the model shape, the layout that wrote it, the data position and every
// shard with its size, its checksum and the logical tensors it holds.
//
// Independent of the layout: a shard holds whole logical tensors under the model's global names ("block5.qkv.weight",
// "block5.moe.expert3.fc1.weight"; tensor-parallel slices are gathered before the save), and the manifest says
// which shard holds each. A run with another stage cut, pipeline, data-, tensor- or expert-parallel size or ZeRO
// stage finds every tensor it needs by name and keeps its own slices: no conversion step. What must agree is the
// model, the data stream and the sequences per step (the data position continues exactly).
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

// A logical tensor a shard holds whole: its parameter's global name and its whole shape (the optimizer state of
// the parameter, when there is any, lies beside it with the same shape).
struct TensorRecord {
  std::string name;
  std::vector<int64_t> shape;
};

struct ShardRecord {
  int stage = 0;
  int expert_rank = -1;  // -1: the whole stage; K >= 0: the stage as expert rank K holds it
  std::string file;  // relative to the step directory
  uint64_t bytes = 0;
  uint64_t checksum = 0;  // fnv1a64
  std::vector<TensorRecord> tensors;  // empty in manifests of older writers (loadable on the same layout only)
};

// Shard records as JSON text and back: how the writing ranks send theirs to the one writing the manifest.
std::string shard_records_to_json(const std::vector<ShardRecord>& shards);
std::vector<ShardRecord> shard_records_from_json(const std::string& text, const std::string& what);

// The highest step a checkpoint may record, as --steps allows; a step-N folder above it is not a checkpoint.
constexpr int kMaxCheckpointStep = 10'000'000;

// What a run must agree with to load the checkpoint: the model and its cut, and the data stream it was on.
struct CheckpointIdentity {
  int64_t vocab = 0, seq_len = 0, hidden = 0, heads = 0;
  int layers = 0;
  std::string stage_cut;  // "3,4,4,3"
  int world_size = 0;
  int64_t experts = 0;      // per MoE layer; 0: dense
  int expert_parallel = 1;  // E: the shards per stage
  // The data order depends on these: another seed or corpus continues a different run, another number of
  // sequences per step (data_parallel x microbatches x batch) other steps.
  uint64_t seed = 0;
  int microbatches = 0;
  int64_t batch = 0;
  uint64_t data_bytes = 0, data_checksum = 0;  // the corpus (0, 0: not recorded, by an older writer)
  // D; 0 in manifests of older writers, whose layout (stage cut, ranks, --ep, --microbatches, --batch) a resume
  // must repeat. Written with the shards' tensor records: a manifest that has it can be loaded on any layout.
  int data_parallel = 0;

  bool layout_free() const { return data_parallel > 0; }
  int64_t sequences_per_step() const { return int64_t{data_parallel} * microbatches * batch; }
};

// The shard file of a stage, as expert rank `expert_rank` holds it (-1: the whole stage).
std::string shard_name(int stage, int expert_rank = -1);

struct CheckpointManifest {
  int step = 0;            // optimizer steps taken
  int planned_steps = 0;   // --steps of the run that wrote it (its learning-rate schedule)
  std::string schedule;    // informational: another schedule with the same cut may load it
  // The run that wrote it: a fresh run draws a new id, a resumed one keeps its checkpoint's. --keep prunes only
  // its own run's checkpoints. Empty in manifests of older writers.
  std::string run;
  CheckpointIdentity identity;
  data::ReaderPosition data_position;  // after `step` steps
  std::vector<ShardRecord> shards;
};

std::string step_directory(const std::string& dir, int step);

// A new run id: 16 hex digits from the system's random source.
std::string new_run_id();

// Creates `dir` (and parents) if needed. Throws InvalidArgument naming it when it is a file, cannot be made or
// cannot be written (tried with a probe file, so a read-only mount is found before training, not at the save).
void prepare_checkpoint_dir(const std::string& dir);

// Marks a step directory as being written by `run` before any shard is (a save killed half-way leaves a
// directory without a manifest: the mark says whose leftover it is).
void mark_step_directory(const std::string& step_dir, const std::string& run);
// True when a save of `run` may replace `step_dir`: it is absent, incomplete (no manifest: the leftover of a killed
// save, which no live job can be writing while `run` holds the directory's lock), or a complete checkpoint of
// `run` itself. Another run's complete checkpoint is never replaced.
bool step_directory_is_replaceable(const std::string& step_dir, const std::string& run);

// Writes manifest.json into `step_dir` atomically. Throws InvalidArgument naming the path on failure.
void write_manifest(const std::string& step_dir, const CheckpointManifest& manifest);
// Throws InvalidArgument naming the file and the field for a missing or malformed manifest, or a number out of
// its range (a negative step, a world size above 2^31, a fractional byte count, ...).
CheckpointManifest read_manifest(const std::string& step_dir);
// The same for the manifest's text; `path` names it in errors.
CheckpointManifest parse_manifest(const std::string& text, const std::string& path);

// The step directory with the highest step that has a manifest; nullopt when there is none. Incomplete ones
// (no manifest) that are newer are listed in `skipped` for the caller to report.
std::optional<std::string> newest_complete_checkpoint(const std::string& dir, std::vector<std::string>* skipped);

// The bytes of one shard, a regular file of its recorded size (compared before reading) and checksum; throws
// InvalidArgument naming the shard otherwise.
std::string read_verified_shard(const std::string& step_dir, const ShardRecord& shard);
// The manifest names one shard per stage of its cut and expert rank, each once; throws InvalidArgument otherwise.
void check_shard_set(const std::string& step_dir, const CheckpointManifest& manifest);
// check_shard_set, then read_verified_shard for every shard of the manifest.
void verify_shards(const std::string& step_dir, const CheckpointManifest& manifest);
// Throws InvalidArgument naming the first field where `manifest` and `expected` differ: the model, the seed, the
// corpus and the sequences per step; for a checkpoint of an older writer (not layout_free()) its layout too.
void check_identity(const std::string& step_dir, const CheckpointIdentity& found, const CheckpointIdentity& expected);

// Removes all but the newest `keep` complete checkpoints of `run`, and its incomplete ones older than its newest
// complete one (keep = 0: removes nothing). Other runs' checkpoints are never touched.
void prune_checkpoints(const std::string& dir, int keep, const std::string& run);

}  // namespace dualpipe::train
