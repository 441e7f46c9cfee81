#include "dualpipe/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStepPrefix = "step-";
constexpr const char* kRunMarkName = "run";

// "step-12" -> 12; -1 for anything else, a number above kMaxCheckpointStep included.
int step_of(const std::string& name) {
  const size_t digits = name.size() - std::strlen(kStepPrefix);
  if (name.rfind(kStepPrefix, 0) != 0 || digits == 0 || digits > 8) return -1;
  int step = 0;
  for (size_t i = name.size() - digits; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step <= kMaxCheckpointStep ? step : -1;
}

// Step directories of `dir`, newest first.
std::vector<std::pair<int, fs::path>> step_directories(const std::string& dir) {
  std::vector<std::pair<int, fs::path>> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const int step = step_of(entry.path().filename().string());
    if (step >= 0 && entry.is_directory()) found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

// A run mark as written (a run id is 16 hex digits); empty when it is missing or cannot be one.
std::string read_run_mark(const fs::path& path) {
  try {
    return read_file_within(path.string(), 64, "a checkpoint's run mark");
  } catch (const InvalidArgument&) {
    return "";
  }
}

// The run of a complete checkpoint (its manifest's) or of one being written (its mark); empty when neither
// says.
std::string run_of(const fs::path& step_dir) {
  std::error_code error;
  if (fs::exists(step_dir / kManifestFileName, error)) {
    try {
      return read_manifest(step_dir.string()).run;
    } catch (const InvalidArgument&) {
      return "";  // unreadable: nobody's to delete
    }
  }
  return read_run_mark(step_dir / kRunMarkName);
}

}  // namespace

std::string shard_name(int stage, int expert_rank) {
  return "stage-" + std::to_string(stage) + (expert_rank >= 0 ? "-ep-" + std::to_string(expert_rank) : "") + ".pt";
}

std::string step_directory(const std::string& dir, int step) {
  return (fs::path(dir) / (kStepPrefix + std::to_string(step))).string();
}

std::string new_run_id() {
  std::random_device random;
  const uint64_t id = (static_cast<uint64_t>(random()) << 32) ^ random();
  return checksum_text(id);
}

void prepare_checkpoint_dir(const std::string& dir) {
  std::error_code error;
  DUALPIPE_REQUIRE(!fs::exists(dir, error) || fs::is_directory(dir, error), "--checkpoint-dir '", dir,
                   "' is a file, not a directory");
  fs::create_directories(dir, error);
  DUALPIPE_REQUIRE(!error, "--checkpoint-dir '", dir, "' cannot be created: ", error.message());
  // Permissions do not say it all (root ignores them; a read-only mount does not): a file is made to find out.
  const std::string probe = (fs::path(dir) / detail::concat(".write-probe.", ::getpid())).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  DUALPIPE_REQUIRE(fd >= 0, "--checkpoint-dir '", dir, "' is not writable: ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void mark_step_directory(const std::string& step_dir, const std::string& run) {
  write_file_atomically((fs::path(step_dir) / kRunMarkName).string(), run);
}

bool step_directory_is_replaceable(const std::string& step_dir, const std::string& run) {
  std::error_code error;
  return !fs::exists(fs::path(step_dir) / kManifestFileName, error) || (!run.empty() && run_of(step_dir) == run);
}

std::optional<std::string> newest_complete_checkpoint(const std::string& dir, std::vector<std::string>* skipped) {
  for (const auto& [step, path] : step_directories(dir)) {
    if (fs::exists(path / kManifestFileName)) return path.string();
    if (skipped) skipped->push_back(path.string());
  }
  return std::nullopt;
}

std::string read_verified_shard(const std::string& step_dir, const ShardRecord& s) {
  const std::string path = (fs::path(step_dir) / s.file).string();
  require_regular_file(path, "checkpoint shard " + path);
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  // Compared before reading: a shard made sparse to terabytes is refused, not loaded.
  DUALPIPE_REQUIRE(!error && size == s.bytes, "checkpoint shard ", path, " has ", size,
                   " bytes, its manifest says ", s.bytes, " (truncated or replaced)");
  const std::string bytes = read_file_within(path, s.bytes, "this checkpoint shard (its manifest's size)");
  DUALPIPE_REQUIRE(bytes.size() == s.bytes, "checkpoint shard ", path, " has ", bytes.size(),
                   " bytes, its manifest says ", s.bytes, " (truncated or replaced)");
  const uint64_t sum = fnv1a64(bytes);
  DUALPIPE_REQUIRE(sum == s.checksum, "checkpoint shard ", path, " is corrupted: checksum ", checksum_text(sum),
                   ", its manifest says ", checksum_text(s.checksum));
  return bytes;
}

void check_shard_set(const std::string& step_dir, const CheckpointManifest& m) {
  // A manifest listing stage 7 of a 4-stage cut is refused here rather than inside a rank.
  const int stages = 1 + static_cast<int>(std::count(m.identity.stage_cut.begin(), m.identity.stage_cut.end(), ','));
  const int experts = m.identity.expert_parallel;
  std::set<std::pair<int, int>> seen;
  for (const ShardRecord& s : m.shards) {
    const bool expert_ok = experts == 1 ? s.expert_rank == -1 : s.expert_rank >= 0 && s.expert_rank < experts;
    DUALPIPE_REQUIRE(s.stage < stages && expert_ok, "checkpoint ", step_dir, ": shard ", s.file, " is for stage ",
                     s.stage, s.expert_rank >= 0 ? detail::concat(" of expert rank ", s.expert_rank) : "",
                     ", outside its stage cut ", m.identity.stage_cut, " (", stages, " stages) and --ep ", experts);
    DUALPIPE_REQUIRE(seen.insert({s.stage, s.expert_rank}).second, "checkpoint ", step_dir, ": stage ", s.stage,
                     " has two shards");
  }
  DUALPIPE_REQUIRE(static_cast<int>(seen.size()) == stages * experts, "checkpoint ", step_dir, " has ", seen.size(),
                   " shards, its stage cut and --ep need ", stages * experts);
}

void verify_shards(const std::string& step_dir, const CheckpointManifest& m) {
  check_shard_set(step_dir, m);
  for (const ShardRecord& s : m.shards) read_verified_shard(step_dir, s);
}

void check_identity(const std::string& step_dir, const CheckpointIdentity& found, const CheckpointIdentity& expected) {
  const char* resume_with = found.layout_free() ? "resume with the same model and data"
                                                : "resume with the same model, stage cut, ranks and data";
  auto same = [&](const char* what, const auto& a, const auto& b) {
    DUALPIPE_REQUIRE(a == b, "checkpoint ", step_dir, " was written with ", what, " ", a, ", this run has ", b, ": ",
                     resume_with);
  };
  same("--hidden", found.hidden, expected.hidden);
  same("--layers", found.layers, expected.layers);
  same("--heads", found.heads, expected.heads);
  same("--seq-len", found.seq_len, expected.seq_len);
  same("vocabulary size", found.vocab, expected.vocab);
  same("--experts", found.experts, expected.experts);
  same("--seed", found.seed, expected.seed);
  if (found.layout_free()) {
    const auto per_step = [](const CheckpointIdentity& id) {
      return detail::concat(id.sequences_per_step(), " sequences per step (--dp ", id.data_parallel,
                            " x --microbatches ", id.microbatches, " x --batch ", id.batch, ")");
    };
    DUALPIPE_REQUIRE(found.sequences_per_step() == expected.sequences_per_step(), "checkpoint ", step_dir,
                     " was written with ", per_step(found), ", this run has ", per_step(expected),
                     ": the data stream continues step for step only with the same number; any layout may resume it");
  } else {
    same("stage cut (--layers-per-stage)", found.stage_cut, expected.stage_cut);
    same("world size (--ranks)", found.world_size, expected.world_size);
    same("--ep", found.expert_parallel, expected.expert_parallel);
    same("--microbatches", found.microbatches, expected.microbatches);
    same("--batch", found.batch, expected.batch);
  }
  if (found.data_bytes == 0 && found.data_checksum == 0) return;  // an older writer did not record the data
  same("--data of corpus bytes", found.data_bytes, expected.data_bytes);
  same("--data of corpus checksum", checksum_text(found.data_checksum), checksum_text(expected.data_checksum));
}

void prune_checkpoints(const std::string& dir, int keep, const std::string& run) {
  if (keep <= 0 || run.empty()) return;
  int complete = 0;
  for (const auto& [step, path] : step_directories(dir)) {
    if (run_of(path) != run) continue;  // another run's, or nobody's we can tell: not ours to delete
    const bool has_manifest = fs::exists(path / kManifestFileName);
    if (has_manifest && ++complete <= keep) continue;
    if (!has_manifest && complete == 0) continue;  // newer than every complete one: maybe being written
    std::error_code error;
    fs::remove_all(path, error);
  }
}

}  // namespace dualpipe::train
