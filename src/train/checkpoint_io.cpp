#include "checkpoint_io.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>

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

// The tensors of a checkpoint by name, each read from the shard that holds it. A shard is read (and its checksum
// verified) once, when a stage first needs one of its tensors: a stage of another cut reads the shards of the
// stages it now spans, and nothing else.
class ShardReader {
 public:
  ShardReader(std::string dir, const CheckpointManifest& manifest) : dir_(std::move(dir)), manifest_(manifest) {
    for (const ShardRecord& shard : manifest.shards)
      for (const TensorRecord& tensor : shard.tensors) holders_[tensor.name].push_back(&shard);
  }

  // The tensors stage `stage` of this run (as expert rank `expert_rank` holds it) loads.
  SavedTensors tensors_of(int stage, int expert_rank) {
    return [this, stage, expert_rank](const std::string& key, torch::Tensor& out) {
      const ShardRecord* shard = holder(parameter_of(key), stage, expert_rank);
      return shard && archive(*shard).try_read(key, out);
    };
  }

  // How errors name what a stage loads from.
  std::string description(int stage, int expert_rank) const {
    return manifest_.identity.layout_free() ? detail::concat("checkpoint ", dir_, " (for stage ", stage, ")")
                                            : (fs::path(dir_) / shard_name(stage, expert_rank)).string();
  }

 private:
  // "adam.block0.qkv.weight.exp_avg" -> "block0.qkv.weight"
  static std::string parameter_of(const std::string& key) {
    const std::size_t dot = key.find('.');
    std::string name = key.substr(dot + 1);
    if (key.rfind("adam.", 0) == 0) name.resize(name.rfind('.'));
    return name;
  }

  // The shard with tensor `name`: of this stage and expert rank where it is one of them (the same layout reads
  // its own shard), else the first that lists it. A manifest of an older writer lists no tensors: its layout is
  // this run's (check_identity), so the stage's own shard holds them all.
  const ShardRecord* holder(const std::string& name, int stage, int expert_rank) const {
    if (!manifest_.identity.layout_free()) {
      for (const ShardRecord& shard : manifest_.shards)
        if (shard.stage == stage && shard.expert_rank == expert_rank) return &shard;
      return nullptr;
    }
    const auto found = holders_.find(name);
    if (found == holders_.end()) return nullptr;
    for (const ShardRecord* shard : found->second)
      if (shard->stage == stage && shard->expert_rank == expert_rank) return shard;
    return found->second.front();
  }

  torch::serialize::InputArchive& archive(const ShardRecord& shard) {
    auto& slot = archives_[shard.file];
    if (!slot) {
      const std::string path = (fs::path(dir_) / shard.file).string();
      std::istringstream in(read_verified_shard(dir_, shard));
      slot = std::make_unique<torch::serialize::InputArchive>();
      try {
        slot->load_from(in);
      } catch (const c10::Error& e) {
        throw InvalidArgument(detail::concat("checkpoint shard ", path, " cannot be read: ", first_line(e.what())));
      }
    }
    return *slot;
  }

  static std::string first_line(std::string text) {
    text.resize(std::min(text.find('\n'), text.size()));
    return text;
  }

  std::string dir_;
  const CheckpointManifest& manifest_;
  std::map<std::string, std::vector<const ShardRecord*>> holders_;
  std::map<std::string, std::unique_ptr<torch::serialize::InputArchive>> archives_;
};

}  // namespace

std::string save_checkpoint(const TrainConfig& c, const RunPlan& plan, int step, const data::ReaderPosition& position,
                            const std::map<int, StageState>& stages, const ShardRole& role,
                            const CheckpointOwner& owner, comm::Communicator& world,
                            std::chrono::milliseconds timeout) {
  const std::string dir = step_directory(c.checkpoint.dir, step);
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

  std::vector<ShardRecord> written;  // the shards this rank wrote, in parallel with the other writers
  for (const auto& [s, state] : stages) {
    if (!role.writes() || plan.schedule.placement.rank_of(0, s) != role.pipeline_rank) continue;
    const SavedStage saved = state.save();
    if (role.inner_rank != 0) continue;  // inner rank 0 has the same bytes
    const std::string file = shard_name(s, role.expert_rank());
    write_file_atomically((fs::path(dir) / file).string(), saved.bytes);
    ShardRecord record{s, role.expert_rank(), file, saved.bytes.size(), fnv1a64(saved.bytes), {}};
    for (const auto& [name, shape] : saved.tensors) record.tensors.push_back({name, shape});
    written.push_back(std::move(record));
  }
  const std::string text = shard_records_to_json(written);
  const torch::Tensor local = torch::from_blob(const_cast<char*>(text.data()), {static_cast<int64_t>(text.size())},
                                               torch::kUInt8);
  const auto gathered = runtime::gather_to_root(world, local, kShardRecordTag, timeout);
  if (world.rank() != 0) return dir;

  CheckpointManifest m;
  m.run = owner.run;
  m.step = step;
  m.planned_steps = c.optimizer.steps;
  m.schedule = plan.schedule.kind;
  m.identity = owner.identity;
  m.data_position = position;
  for (std::size_t r = 0; r < gathered.size(); ++r) {
    const std::string part(static_cast<const char*>(gathered[r].data_ptr()), gathered[r].numel());
    for (ShardRecord& shard : shard_records_from_json(part, detail::concat("the shard records of rank ", r)))
      m.shards.push_back(std::move(shard));
  }
  DUALPIPE_CHECK(static_cast<int>(m.shards.size()) == plan.cut.num_stages() * role.expert_parallel,
                 m.shards.size(), " shards for ", plan.cut.num_stages(), " stages and ", role.expert_parallel,
                 " expert ranks");
  maybe_die_before_manifest(step);
  write_manifest(dir, m);
  prune_checkpoints(c.checkpoint.dir, c.checkpoint.keep, owner.run);
  return dir;
}

std::optional<Resumed> load_newest_checkpoint(const TrainConfig& c, const CheckpointIdentity& identity,
                                              const ShardRole& role, std::map<int, StageState>& stages,
                                              std::vector<std::string>* skipped) {
  const auto dir = newest_complete_checkpoint(c.checkpoint.dir, skipped);
  if (!dir) return std::nullopt;
  Resumed resumed{*dir, read_manifest(*dir)};
  check_resumable(c, identity, *dir, resumed.manifest);
  ShardReader shards(*dir, resumed.manifest);
  for (auto& [s, state] : stages) state.load(shards.tensors_of(s, role.expert_rank()), shards.description(s, role.expert_rank()));
  return resumed;
}

namespace {

// The expert a parameter belongs to ("block3.moe.expert5.fc1.weight" -> 5), or -1 for one every expert rank loads.
int expert_of(const std::string& name) {
  const std::size_t at = name.find(".expert");
  if (at == std::string::npos) return -1;
  std::size_t end = at + 7;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == at + 7 || (end < name.size() && name[end] != '.')) return -1;
  return std::stoi(name.substr(at + 7, end - at - 7));
}

}  // namespace

void check_checkpoint_loads(const RunPlan& plan, int expert_parallel, const std::string& dir,
                            const CheckpointManifest& manifest) {
  ShardReader shards(dir, manifest);
  const int local_experts = plan.model.moe.experts > 0 ? plan.model.moe.experts / expert_parallel : 1;
  torch::NoGradGuard no_grad;
  for (int s = 0; s < plan.cut.num_stages(); ++s) {
    const models::GptStage whole(plan.model, plan.cut, s);  // every expert, no tensor parallelism: whole tensors
    for (const auto& p : whole->named_parameters()) {
      const int expert = expert_of(p.key());
      for (int e = 0; e < expert_parallel; ++e) {
        if (expert >= 0 && expert / local_experts != e) continue;  // not one of expert rank e's
        const int expert_rank = expert_parallel > 1 ? e : -1;
        const std::string what = shards.description(s, expert_rank);
        torch::Tensor saved;
        DUALPIPE_REQUIRE(shards.tensors_of(s, expert_rank)("parameter." + p.key(), saved), what, " has no tensor ",
                         "parameter.", p.key(), " for stage ", s,
                         expert_rank >= 0 ? detail::concat(" of expert rank ", expert_rank) : "",
                         " (its manifest names a shard that does not hold it)");
        DUALPIPE_REQUIRE(saved.sizes() == p.value().sizes(), what, ": ", p.key(), " has shape ", saved.sizes(),
                         ", the model needs ", p.value().sizes());
      }
    }
  }
}

}  // namespace dualpipe::train
