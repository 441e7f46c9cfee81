#include "dualpipe/train/checkpoint.h"

#include <nlohmann/json.hpp>

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
using nlohmann::json;

constexpr int kFormatVersion = 1;
constexpr const char* kManifestName = "manifest.json";
constexpr const char* kStepPrefix = "step-";
constexpr const char* kRunMarkName = "run";
// A shard larger than this is not one of ours (a model of 2^40 bytes per stage is far beyond this trainer).
constexpr uint64_t kMaxShardBytes = uint64_t{1} << 40;
constexpr std::size_t kMaxManifestBytes = std::size_t{16} << 20;  // a manifest lists one line per shard

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

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The integer at `key` of `j`, from low to high: a fraction, a string or 1e20 is refused by name instead of
// being converted into something else.
int64_t integer(const json& j, const char* key, int64_t low, int64_t high, const std::string& path) {
  const json& value = j.at(key);
  bool in_range = false;
  if (value.is_number_unsigned()) {  // how the parser stores every non-negative integer
    const uint64_t u = value.get<uint64_t>();
    in_range = u <= static_cast<uint64_t>(high) && static_cast<int64_t>(u) >= low;
  } else if (value.is_number_integer()) {
    in_range = value.get<int64_t>() >= low && value.get<int64_t>() <= high;
  }
  DUALPIPE_REQUIRE(in_range, path, ": '", key, "' is ", value.dump(), ", not an integer from ", low, " to ", high);
  return value.get<int64_t>();
}

uint64_t unsigned_integer(const json& j, const char* key, const std::string& path) {
  const json& value = j.at(key);
  DUALPIPE_REQUIRE(value.is_number_unsigned(), path, ": '", key, "' is ", value.dump(),
                   ", not an integer from 0 to 2^64 - 1");
  return value.get<uint64_t>();
}

uint64_t checksum(const json& j, const char* key, const std::string& path) {
  const std::string text = j.at(key).get<std::string>();
  const bool hex16 = text.size() == 16 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
  DUALPIPE_REQUIRE(hex16, path, ": '", key, "' is '", text, "', not 16 lowercase hex digits");
  return std::stoull(text, nullptr, 16);
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
  if (fs::exists(step_dir / kManifestName, error)) {
    try {
      return read_manifest(step_dir.string()).run;
    } catch (const InvalidArgument&) {
      return "";  // unreadable: nobody's to delete
    }
  }
  return read_run_mark(step_dir / kRunMarkName);
}

json shards_json(const std::vector<ShardRecord>& shards) {
  json list = json::array();
  for (const ShardRecord& s : shards) {
    json shard = {{"stage", s.stage}, {"file", s.file}, {"bytes", s.bytes}, {"fnv1a64", hex(s.checksum)}};
    if (s.expert_rank >= 0) shard["expert_rank"] = s.expert_rank;
    if (!s.tensors.empty()) {
      json tensors = json::object();
      for (const TensorRecord& t : s.tensors) tensors[t.name] = t.shape;
      shard["tensors"] = std::move(tensors);
    }
    list.push_back(std::move(shard));
  }
  return list;
}

constexpr int64_t kMaxCount = 1 << 30;  // layers, ranks, widths, experts: far above anything trainable here

std::vector<ShardRecord> parse_shards(const json& list, const std::string& path) {
  DUALPIPE_REQUIRE(list.is_array(), path, ": 'shards' is ", list.dump(), ", not a list");
  std::vector<ShardRecord> shards;
  for (const json& s : list) {
    const std::string file = s.at("file").get<std::string>();
    DUALPIPE_REQUIRE(file.find('/') == std::string::npos && file != ".." && file != "." && !file.empty(), path,
                     ": shard file name '", file, "' must be a plain name inside the step directory");
    const int expert_rank =
        s.contains("expert_rank") ? static_cast<int>(integer(s, "expert_rank", 0, kMaxCount, path)) : -1;
    ShardRecord record{static_cast<int>(integer(s, "stage", 0, kMaxCount, path)), expert_rank, file,
                       static_cast<uint64_t>(integer(s, "bytes", 0, static_cast<int64_t>(kMaxShardBytes), path)),
                       checksum(s, "fnv1a64", path), {}};
    if (s.contains("tensors")) {
      for (const auto& [name, shape] : s.at("tensors").items()) {
        TensorRecord tensor{name, {}};
        DUALPIPE_REQUIRE(shape.is_array() && shape.size() <= 8, path, ": the shape of tensor '", name, "' in shard ",
                         file, " is ", shape.dump(), ", not a list of at most 8 sizes");
        for (const json& size : shape) {
          DUALPIPE_REQUIRE(size.is_number_unsigned() && size.get<uint64_t>() <= uint64_t{kMaxCount}, path,
                           ": the shape of tensor '", name, "' in shard ", file, " has size ", size.dump(),
                           ", not an integer from 0 to ", kMaxCount);
          tensor.shape.push_back(size.get<int64_t>());
        }
        record.tensors.push_back(std::move(tensor));
      }
    }
    shards.push_back(std::move(record));
  }
  return shards;
}

}  // namespace

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string shard_name(int stage, int expert_rank) {
  return "stage-" + std::to_string(stage) + (expert_rank >= 0 ? "-ep-" + std::to_string(expert_rank) : "") + ".pt";
}

std::string step_directory(const std::string& dir, int step) {
  return (fs::path(dir) / (kStepPrefix + std::to_string(step))).string();
}

std::string new_run_id() {
  std::random_device random;
  const uint64_t id = (static_cast<uint64_t>(random()) << 32) ^ random();
  return hex(id);
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
  return !fs::exists(fs::path(step_dir) / kManifestName, error) || (!run.empty() && run_of(step_dir) == run);
}

void write_manifest(const std::string& step_dir, const CheckpointManifest& m) {
  const CheckpointIdentity& id = m.identity;
  json j = {
      {"format", kFormatVersion}, {"run", m.run}, {"step", m.step}, {"planned_steps", m.planned_steps},
      {"schedule", m.schedule}, {"microbatches", id.microbatches}, {"batch", id.batch}, {"seed", id.seed},
      {"data", {{"bytes", id.data_bytes}, {"fnv1a64", hex(id.data_checksum)}}},
      {"model",
       {{"vocab", id.vocab}, {"seq_len", id.seq_len}, {"hidden", id.hidden}, {"heads", id.heads},
        {"layers", id.layers}}},
      {"stage_cut", id.stage_cut}, {"world_size", id.world_size}, {"experts", id.experts},
      {"expert_parallel", id.expert_parallel},
      {"data_position", {{"epoch", m.data_position.epoch}, {"index", m.data_position.index}}},
      // The training step draws no random numbers (no dropout; data order comes from the seed and the data
      // position; sampling re-seeds from the seed), so the seed is all the random state there is.
      {"rng", {{"seed", id.seed}}},
      {"shards", shards_json(m.shards)}};
  if (id.layout_free()) j["data_parallel"] = id.data_parallel;
  write_file_atomically((fs::path(step_dir) / kManifestName).string(), j.dump(2) + "\n");
}

std::string shard_records_to_json(const std::vector<ShardRecord>& shards) { return shards_json(shards).dump(); }

std::vector<ShardRecord> shard_records_from_json(const std::string& text, const std::string& what) {
  try {
    return parse_shards(json::parse(text, nullptr, true, false), what);
  } catch (const json::exception& e) {
    throw InvalidArgument(detail::concat(what, " is malformed: ", e.what()));
  }
}

CheckpointManifest read_manifest(const std::string& step_dir) {
  const std::string path = (fs::path(step_dir) / kManifestName).string();
  return parse_manifest(read_file_within(path, kMaxManifestBytes, "checkpoint manifests"), path);
}

CheckpointManifest parse_manifest(const std::string& text, const std::string& path) {
  try {
    const json j = json::parse(text, nullptr, true, false);
    DUALPIPE_REQUIRE(j.at("format") == kFormatVersion, path, ": format ", j.at("format"), " is not ", kFormatVersion);
    CheckpointManifest m;
    m.run = j.value("run", std::string{});  // absent from older manifests
    m.step = static_cast<int>(integer(j, "step", 1, kMaxCheckpointStep, path));
    m.planned_steps = static_cast<int>(integer(j, "planned_steps", 1, kMaxCheckpointStep, path));
    m.schedule = j.at("schedule").get<std::string>();
    CheckpointIdentity& id = m.identity;
    id.microbatches = static_cast<int>(integer(j, "microbatches", 1, kMaxCount, path));
    id.batch = integer(j, "batch", 1, kMaxCount, path);
    id.seed = unsigned_integer(j, "seed", path);
    if (j.contains("data")) {
      id.data_bytes = unsigned_integer(j.at("data"), "bytes", path);
      id.data_checksum = checksum(j.at("data"), "fnv1a64", path);
    }
    const json& model = j.at("model");
    id.vocab = integer(model, "vocab", 1, kMaxCount, path);
    id.seq_len = integer(model, "seq_len", 1, kMaxCount, path);
    id.hidden = integer(model, "hidden", 1, kMaxCount, path);
    id.heads = integer(model, "heads", 1, kMaxCount, path);
    id.layers = static_cast<int>(integer(model, "layers", 1, kMaxCount, path));
    id.stage_cut = j.at("stage_cut").get<std::string>();
    id.world_size = static_cast<int>(integer(j, "world_size", 1, kMaxCount, path));
    // Absent from manifests written before mixtures of experts: dense, one shard per stage.
    id.experts = j.contains("experts") ? integer(j, "experts", 0, kMaxCount, path) : 0;
    id.expert_parallel =
        j.contains("expert_parallel") ? static_cast<int>(integer(j, "expert_parallel", 1, kMaxCount, path)) : 1;
    m.data_position = {unsigned_integer(j.at("data_position"), "epoch", path),
                       unsigned_integer(j.at("data_position"), "index", path)};
    m.shards = parse_shards(j.at("shards"), path);
    if (j.contains("data_parallel")) {
      id.data_parallel = static_cast<int>(integer(j, "data_parallel", 1, kMaxCount, path));
      for (const ShardRecord& s : m.shards)
        DUALPIPE_REQUIRE(!s.tensors.empty(), path, ": shard ", s.file,
                         " lists no tensors, which a manifest with 'data_parallel' needs to be loaded on any layout");
    }
    return m;
  } catch (const json::exception& e) {
    throw InvalidArgument(detail::concat("checkpoint manifest ", path, " is malformed: ", e.what()));
  }
}

std::optional<std::string> newest_complete_checkpoint(const std::string& dir, std::vector<std::string>* skipped) {
  for (const auto& [step, path] : step_directories(dir)) {
    if (fs::exists(path / kManifestName)) return path.string();
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
  DUALPIPE_REQUIRE(sum == s.checksum, "checkpoint shard ", path, " is corrupted: checksum ", hex(sum),
                   ", its manifest says ", hex(s.checksum));
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
  same("--data of corpus checksum", hex(found.data_checksum), hex(expected.data_checksum));
}

void prune_checkpoints(const std::string& dir, int keep, const std::string& run) {
  if (keep <= 0 || run.empty()) return;
  int complete = 0;
  for (const auto& [step, path] : step_directories(dir)) {
    if (run_of(path) != run) continue;  // another run's, or nobody's we can tell: not ours to delete
    const bool has_manifest = fs::exists(path / kManifestName);
    if (has_manifest && ++complete <= keep) continue;
    if (!has_manifest && complete == 0) continue;  // newer than every complete one: maybe being written
    std::error_code error;
    fs::remove_all(path, error);
  }
}

}  // namespace dualpipe::train
