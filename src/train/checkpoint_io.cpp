#include "checkpoint_io.h"

#include <signal.h>

#include <cstdlib>
#include <filesystem>

#include "dualpipe/comm/channels.h"
#include "dualpipe/runtime/gather.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {
namespace {

namespace fs = std::filesystem;

constexpr int kShardRecordTag = comm::tag(comm::Channel::ShardRecords);

// For the test that kills a job while it saves (tests/train): DUALPIPE_TEST_KILL_BEFORE_MANIFEST=N makes rank
// 0 die by SIGKILL once every shard of step N is written and before the manifest is, the worst moment.
void maybe_die_before_manifest(int step) {
  const char* when = std::getenv("DUALPIPE_TEST_KILL_BEFORE_MANIFEST");
  if (when && std::atoi(when) == step) raise(SIGKILL);
}

}  // namespace

std::string save_checkpoint(const TrainConfig& c, const RunPlan& plan, int step, const data::ReaderPosition& position,
                            const std::map<int, StageState>& stages, const ShardRole& role,
                            const CheckpointOwner& owner, comm::Communicator& world,
                            std::chrono::milliseconds timeout) {
  const std::string dir = step_directory(c.checkpoint_dir, step);
  if (world.rank() == 0) {
    DUALPIPE_REQUIRE(step_directory_is_replaceable(dir, owner.run), "checkpoint ", dir,
                     " belongs to another run: not replaced (use a --checkpoint-dir of this run's own)");
    std::error_code error;
    fs::remove_all(dir, error);  // a leftover of a killed save
    fs::create_directories(dir, error);
    DUALPIPE_REQUIRE(!error, "cannot create the checkpoint directory ", dir, ": ", error.message());
    mark_step_directory(dir, owner.run);
  }
  world.barrier();

  std::vector<int64_t> records;  // (stage, expert rank, bytes, checksum) per shard this rank wrote
  for (const auto& [s, state] : stages) {
    if (!role.writes() || plan.schedule.placement.rank_of(0, s) != role.pipeline_rank) continue;
    const std::string bytes = state.save();
    if (role.tensor_rank != 0) continue;  // tensor rank 0 has the same bytes
    write_file_atomically((fs::path(dir) / shard_name(s, role.expert_rank())).string(), bytes);
    const uint64_t checksum = fnv1a64(bytes);
    records.insert(records.end(),
                   {s, role.expert_rank(), static_cast<int64_t>(bytes.size()), static_cast<int64_t>(checksum)});
  }
  const auto gathered = runtime::gather_to_root(world, torch::tensor(records, torch::kLong), kShardRecordTag, timeout);
  if (world.rank() != 0) return dir;

  CheckpointManifest m;
  m.run = owner.run;
  m.step = step;
  m.planned_steps = c.steps;
  m.schedule = plan.schedule.kind;
  m.identity = owner.identity;
  m.data_position = position;
  for (const auto& part : gathered) {
    const int64_t* r = part.data_ptr<int64_t>();
    for (int64_t i = 0; i + 3 < part.numel(); i += 4) {
      const int stage = static_cast<int>(r[i]), expert_rank = static_cast<int>(r[i + 1]);
      m.shards.push_back({stage, expert_rank, shard_name(stage, expert_rank), static_cast<uint64_t>(r[i + 2]),
                          static_cast<uint64_t>(r[i + 3])});
    }
  }
  DUALPIPE_CHECK(static_cast<int>(m.shards.size()) == plan.cut.num_stages() * role.expert_parallel,
                 m.shards.size(), " shards for ", plan.cut.num_stages(), " stages and ", role.expert_parallel,
                 " expert ranks");
  maybe_die_before_manifest(step);
  write_manifest(dir, m);
  prune_checkpoints(c.checkpoint_dir, c.keep, owner.run);
  return dir;
}

std::optional<Resumed> load_newest_checkpoint(const TrainConfig& c, const CheckpointIdentity& identity,
                                              const ShardRole& role, std::map<int, StageState>& stages,
                                              std::vector<std::string>* skipped) {
  const auto dir = newest_complete_checkpoint(c.checkpoint_dir, skipped);
  if (!dir) return std::nullopt;
  Resumed resumed{*dir, read_manifest(*dir)};
  check_resumable(c, identity, *dir, resumed.manifest);
  for (auto& [s, state] : stages) {
    const ShardRecord* shard = nullptr;
    for (const ShardRecord& r : resumed.manifest.shards)
      if (r.stage == s && r.expert_rank == role.expert_rank()) shard = &r;
    DUALPIPE_REQUIRE(shard, "checkpoint ", *dir, " has no shard for stage ", s,
                     role.expert_rank() >= 0 ? detail::concat(" of expert rank ", role.expert_rank()) : "");
    state.load(read_verified_shard(*dir, *shard), (fs::path(*dir) / shard->file).string());
  }
  return resumed;
}

}  // namespace dualpipe::train
