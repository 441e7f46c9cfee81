#include "dualpipe/train/run_plan.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "dualpipe/data/byte_tokenizer.h"
#include "dualpipe/run/train_rules.h"
#include "dualpipe/train/checkpoint.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/output_paths.h"
#include "checkpoint_io.h"
#include "device_choice.h"
#include "device_emulation.h"
#include "kineto_profile.h"
#include "output_dirs.h"
#include "training_data.h"

namespace dualpipe::train {

namespace {

// The least a CPU run holds: one copy of the model's weights, gradients and AdamW moments (16 bytes a parameter,
// float32), and the same again for the step-1 single-process reference. Above this machine's memory it cannot
// run: refused here, with the sizes, rather than by an allocation failing inside a rank.
void check_fits_in_memory(const TrainConfig& c, const models::GptConfig& model) {
  if (c.device.kind != run::DeviceKind::Cpu) return;  // the stages live in GPU memory, which this machine cannot see
  const double parameters = static_cast<double>(model.parameter_count());
  const double needed = parameters * 16 * 2;
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  DUALPIPE_REQUIRE(physical <= 0 || needed <= physical, "the model has ", parameters / 1e6,
                   " million parameters: its weights, gradients and AdamW state (16 bytes a parameter) and the "
                   "step-1 reference's take at least ", describe_bytes(needed), ", above this machine's ",
                   describe_bytes(physical), " of memory: use a smaller --hidden, --layers or --experts");
}

}  // namespace

RunPlan make_run_plan(const TrainConfig& c) {
  run::check_options(c);
  RunPlan plan;
  plan.schedule = run::schedule_of(c);
  const int stages = plan.schedule.num_stages;
  DUALPIPE_REQUIRE(c.model.layers >= stages, "--layers ", c.model.layers, " is fewer than the ", stages, " stages of ",
                   plan.schedule.kind, " on ", c.parallel.pp, " ranks: every stage needs at least one layer");
  plan.cut = c.model.layers_per_stage.empty() ? models::StageCut::balanced(c.model.layers, stages)
                                              : models::StageCut::of(c.model.layers_per_stage, c.model.layers, stages);
  plan.model.vocab = data::ByteTokenizer::kVocabSize;
  plan.model.seq_len = c.model.seq_len;
  plan.model.hidden = c.model.hidden;
  plan.model.heads = c.model.heads;
  plan.model.layers = c.model.layers;
  plan.model.seed = c.data.seed;
  plan.model.moe.experts = c.model.experts;
  plan.model.moe.top_k = c.model.top_k;
  plan.model.moe.capacity_factor = c.model.capacity_factor;
  DUALPIPE_REQUIRE(std::isfinite(c.model.aux_loss) && c.model.aux_loss >= 0 && c.model.aux_loss <= 100,
                   "--aux-loss must be between 0 and 100, got ", c.model.aux_loss);
  plan.model.moe.aux_loss_weight = c.model.aux_loss / c.pipeline.microbatches;  // as each micro-batch's loss is weighted
  plan.model.emulated_stages = emulated_stages(c, plan.cut);
  plan.model.check();
  check_fits_in_memory(c, plan.model);
  plan.lr = {c.optimizer.lr, c.optimizer.min_lr, c.optimizer.warmup, c.optimizer.steps};
  plan.lr.check();
  return plan;
}

namespace {

// An output file is written at the end of a long run (the trace) or as it goes (the metrics): its folder must
// exist and be writable before the run starts, not when the work is done.
void check_output_path(const char* option, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  const fs::path parent = fs::absolute(path).parent_path();
  std::error_code error;
  DUALPIPE_REQUIRE(fs::is_directory(parent, error), option, " '", path, "': the folder ", parent.string(),
                   " does not exist");
  DUALPIPE_REQUIRE(access(parent.c_str(), W_OK) == 0, option, " '", path, "': the folder ", parent.string(),
                   " is not writable");
  DUALPIPE_REQUIRE(!fs::is_directory(path, error), option, " '", path, "' is a directory, not a file");
}

}  // namespace

void check_fresh_start(const TrainConfig& c) {
  if (c.checkpoint.resume) return;
  const auto newest = newest_complete_checkpoint(c.checkpoint.dir, nullptr);
  DUALPIPE_REQUIRE(!newest, "--checkpoint-dir '", c.checkpoint.dir, "' holds the checkpoints of an earlier run (the "
                   "newest is ", newest.value_or(""), "): add --resume to continue it, or choose an empty directory");
}

namespace {

void check_checkpoint_dir(const TrainConfig& c, const RunPlan& plan, TrainingData& data) {
  if (c.checkpoint.dir.empty()) return;
  prepare_checkpoint_dir(c.checkpoint.dir);
  check_fresh_start(c);
  if (!c.checkpoint.resume) return;
  // The checkpoint --resume will load: refused here, once, if it does not fit or is damaged.
  if (const auto dir = newest_complete_checkpoint(c.checkpoint.dir, nullptr)) {
    const CheckpointManifest manifest = read_manifest(*dir);
    check_resumable(c, checkpoint_identity(c, plan, data.corpus), *dir, manifest);
    // Every shard holds parameters of the model, so check_checkpoint_loads reads (and verifies) each, once.
    check_shard_set(*dir, manifest);
    check_checkpoint_loads(plan, c.parallel.ep, *dir, manifest);
    data.reader.restore(manifest.data_position);
  }
}

}  // namespace

void check_config(const TrainConfig& c) {
  const RunPlan plan = make_run_plan(c);
  choose_device(c);
  check_output_path("--trace", c.outputs.trace);
  check_output_path("--metrics", c.outputs.metrics);
  check_output_dirs(c);
  check_kineto_trace_dir(c.outputs.kineto_trace, c.optimizer.steps, c.outputs.kineto_steps);
  TrainingData data = load_training_data(c);
  std::vector<NamedPath> inputs = {{"--schedule-file", c.pipeline.schedule_file}, {"--checkpoint-dir", c.checkpoint.dir}};
  for (const std::string& file : data.corpus.files) inputs.push_back({"--data", file});
  check_outputs_apart(inputs, {{"--metrics", c.outputs.metrics}, {"--trace", c.outputs.trace}});
  check_checkpoint_dir(c, plan, data);
  make_output_dirs(c);  // the ranks write into them; made once nothing was refused
}

void check_resumable(const TrainConfig& c, const CheckpointIdentity& identity, const std::string& dir,
                     const CheckpointManifest& manifest) {
  check_identity(dir, manifest.identity, identity);
  DUALPIPE_REQUIRE(c.optimizer.steps > manifest.step, "--steps ", c.optimizer.steps, " leaves nothing to train after checkpoint ", dir,
                   " (step ", manifest.step, "): give --steps above ", manifest.step);
}

CheckpointIdentity checkpoint_identity(const TrainConfig& c, const RunPlan& plan, const data::Corpus& corpus) {
  CheckpointIdentity id{plan.model.vocab, plan.model.seq_len, plan.model.hidden, plan.model.heads,
                        plan.model.layers, plan.cut.to_string(), c.parallel.pp, plan.model.moe.experts, c.parallel.ep};
  id.seed = c.data.seed;
  id.microbatches = c.pipeline.microbatches;
  id.batch = c.data.batch;
  id.data_parallel = c.parallel.dp;
  id.data_bytes = corpus.text.size();
  id.data_checksum = fnv1a64(corpus.text);
  return id;
}

}  // namespace dualpipe::train
