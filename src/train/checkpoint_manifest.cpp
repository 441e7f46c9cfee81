#include "dualpipe/train/checkpoint_manifest.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kFormatVersion = 1;
// A shard larger than this is not one of ours (a model of 2^40 bytes per stage is far beyond this trainer).
constexpr uint64_t kMaxShardBytes = uint64_t{1} << 40;
constexpr std::size_t kMaxManifestBytes = std::size_t{16} << 20;  // a manifest lists one line per shard

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

json shards_json(const std::vector<ShardRecord>& shards) {
  json list = json::array();
  for (const ShardRecord& s : shards) {
    json shard = {{"stage", s.stage}, {"file", s.file}, {"bytes", s.bytes}, {"fnv1a64", checksum_text(s.checksum)}};
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

std::string checksum_text(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void write_manifest(const std::string& step_dir, const CheckpointManifest& m) {
  const CheckpointIdentity& id = m.identity;
  json j = {
      {"format", kFormatVersion}, {"run", m.run}, {"step", m.step}, {"planned_steps", m.planned_steps},
      {"schedule", m.schedule}, {"microbatches", id.microbatches}, {"batch", id.batch}, {"seed", id.seed},
      {"data", {{"bytes", id.data_bytes}, {"fnv1a64", checksum_text(id.data_checksum)}}},
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
  write_file_atomically((fs::path(step_dir) / kManifestFileName).string(), j.dump(2) + "\n");
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
  const std::string path = (fs::path(step_dir) / kManifestFileName).string();
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

}  // namespace dualpipe::train
