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

#include "dualpipe/train/checkpoint_manifest.h"

namespace dualpipe::train {

// The shard file of a stage, as expert rank `expert_rank` holds it (-1: the whole stage).
std::string shard_name(int stage, int expert_rank = -1);

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
