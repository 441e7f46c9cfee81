// A checkpoint's manifest (DIR/step-N/manifest.json, checkpoint.h): the step, the model shape, the layout that wrote
// it, the data position and every shard with its size, its checksum and the logical tensors it holds; as JSON and
// back, every number checked against its range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dualpipe/data/sequence_reader.h"

namespace dualpipe::train {

// The manifest's name in a step directory: a step directory without one is an incomplete checkpoint.
inline constexpr const char* kManifestFileName = "manifest.json";

// FNV-1a, 64 bits: catches truncation and flipped bytes, which is what a checksum here is for.
uint64_t fnv1a64(const std::string& bytes);
// A checksum (or a run id) as the manifest writes it: 16 lowercase hex digits.
std::string checksum_text(uint64_t value);

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

// Writes manifest.json into `step_dir` atomically. Throws InvalidArgument naming the path on failure.
void write_manifest(const std::string& step_dir, const CheckpointManifest& manifest);
// Throws InvalidArgument naming the file and the field for a missing or malformed manifest, or a number out of
// its range (a negative step, a world size above 2^31, a fractional byte count, ...).
CheckpointManifest read_manifest(const std::string& step_dir);
// The same for the manifest's text; `path` names it in errors.
CheckpointManifest parse_manifest(const std::string& text, const std::string& path);

}  // namespace dualpipe::train
