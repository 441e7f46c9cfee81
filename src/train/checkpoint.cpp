#include "dualpipe/train/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dualpipe/atomic_file.h"
#include "dualpipe/error.h"

namespace dualpipe::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kFormatVersion = 1;
constexpr const char* kManifestName = "manifest.json";
constexpr const char* kStepPrefix = "step-";

// "step-12" -> 12; -1 for anything else.
int step_of(const std::string& name) {
  if (name.rfind(kStepPrefix, 0) != 0 || name.size() == 5 || name.size() > 15) return -1;
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return -1;
  return std::stoi(name.substr(5));
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

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
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

void prepare_checkpoint_dir(const std::string& dir) {
  std::error_code error;
  DUALPIPE_REQUIRE(!fs::exists(dir, error) || fs::is_directory(dir, error), "--checkpoint-dir '", dir,
                   "' is a file, not a directory");
  fs::create_directories(dir, error);
  DUALPIPE_REQUIRE(!error, "--checkpoint-dir '", dir, "' cannot be created: ", error.message());
}

void write_manifest(const std::string& step_dir, const CheckpointManifest& m) {
  json shards = json::array();
  for (const ShardRecord& s : m.shards) {
    json shard = {{"stage", s.stage}, {"file", s.file}, {"bytes", s.bytes}, {"fnv1a64", hex(s.checksum)}};
    if (s.expert_rank >= 0) shard["expert_rank"] = s.expert_rank;
    shards.push_back(std::move(shard));
  }
  const json j = {
      {"format", kFormatVersion},
      {"step", m.step},
      {"planned_steps", m.planned_steps},
      {"schedule", m.schedule},
      {"microbatches", m.microbatches},
      {"batch", m.batch},
      {"seed", m.seed},
      {"model",
       {{"vocab", m.identity.vocab},
        {"seq_len", m.identity.seq_len},
        {"hidden", m.identity.hidden},
        {"heads", m.identity.heads},
        {"layers", m.identity.layers}}},
      {"stage_cut", m.identity.stage_cut},
      {"world_size", m.identity.world_size},
      {"experts", m.identity.experts},
      {"expert_parallel", m.identity.expert_parallel},
      {"data_position", {{"epoch", m.data_position.epoch}, {"index", m.data_position.index}}},
      // The training step draws no random numbers (no dropout; data order comes from the seed and the data
      // position; sampling re-seeds from the seed), so the seed is all the random state there is.
      {"rng", {{"seed", m.seed}}},
      {"shards", shards}};
  write_file_atomically((fs::path(step_dir) / kManifestName).string(), j.dump(2) + "\n");
}

CheckpointManifest read_manifest(const std::string& step_dir) {
  const fs::path path = fs::path(step_dir) / kManifestName;
  std::ifstream in(path);
  DUALPIPE_REQUIRE(in, "checkpoint manifest ", path.string(), " is missing or unreadable");
  try {
    const json j = json::parse(in, nullptr, true, false);
    DUALPIPE_REQUIRE(j.at("format").get<int>() == kFormatVersion, path.string(), ": format ", j.at("format"),
                     " is not ", kFormatVersion);
    CheckpointManifest m;
    m.step = j.at("step").get<int>();
    m.planned_steps = j.at("planned_steps").get<int>();
    m.schedule = j.at("schedule").get<std::string>();
    m.microbatches = j.at("microbatches").get<int>();
    m.batch = j.at("batch").get<int64_t>();
    m.seed = j.at("seed").get<uint64_t>();
    const json& model = j.at("model");
    m.identity = {model.at("vocab").get<int64_t>(), model.at("seq_len").get<int64_t>(),
                  model.at("hidden").get<int64_t>(), model.at("heads").get<int64_t>(),
                  model.at("layers").get<int>(),     j.at("stage_cut").get<std::string>(),
                  j.at("world_size").get<int>()};
    // Absent from manifests written before mixtures of experts: dense, one shard per stage.
    m.identity.experts = j.value("experts", int64_t{0});
    m.identity.expert_parallel = j.value("expert_parallel", 1);
    m.data_position = {j.at("data_position").at("epoch").get<uint64_t>(),
                       j.at("data_position").at("index").get<uint64_t>()};
    for (const json& s : j.at("shards")) {
      const std::string file = s.at("file").get<std::string>();
      DUALPIPE_REQUIRE(file.find('/') == std::string::npos && file != ".." && !file.empty(), path.string(),
                       ": shard file name '", file, "' must be a plain name inside the step directory");
      m.shards.push_back({s.at("stage").get<int>(), s.value("expert_rank", -1), file, s.at("bytes").get<uint64_t>(),
                          std::stoull(s.at("fnv1a64").get<std::string>(), nullptr, 16)});
    }
    return m;
  } catch (const json::exception& e) {
    throw InvalidArgument(detail::concat("checkpoint manifest ", path.string(), " is malformed: ", e.what()));
  } catch (const std::logic_error& e) {  // stoull
    throw InvalidArgument(detail::concat("checkpoint manifest ", path.string(), " has a bad checksum: ", e.what()));
  }
}

std::optional<std::string> newest_complete_checkpoint(const std::string& dir, std::vector<std::string>* skipped) {
  for (const auto& [step, path] : step_directories(dir)) {
    if (fs::exists(path / kManifestName)) return path.string();
    if (skipped) skipped->push_back(path.string());
  }
  return std::nullopt;
}

void verify_shards(const std::string& step_dir, const CheckpointManifest& m) {
  for (const ShardRecord& s : m.shards) {
    const fs::path path = fs::path(step_dir) / s.file;
    std::error_code error;
    DUALPIPE_REQUIRE(fs::is_regular_file(path, error), "checkpoint shard ", path.string(), " is missing");
    const std::string bytes = read_bytes(path);
    DUALPIPE_REQUIRE(bytes.size() == s.bytes, "checkpoint shard ", path.string(), " has ", bytes.size(),
                     " bytes, its manifest says ", s.bytes, " (truncated or replaced)");
    const uint64_t sum = fnv1a64(bytes);
    DUALPIPE_REQUIRE(sum == s.checksum, "checkpoint shard ", path.string(), " is corrupted: checksum ", hex(sum),
                     ", its manifest says ", hex(s.checksum));
  }
}

void check_identity(const std::string& step_dir, const CheckpointIdentity& found, const CheckpointIdentity& expected) {
  auto same = [&](const char* what, const auto& a, const auto& b) {
    DUALPIPE_REQUIRE(a == b, "checkpoint ", step_dir, " was written with ", what, " ", a, ", this run has ", b,
                     ": resume with the same model, stage cut and ranks");
  };
  same("--hidden", found.hidden, expected.hidden);
  same("--layers", found.layers, expected.layers);
  same("--heads", found.heads, expected.heads);
  same("--seq-len", found.seq_len, expected.seq_len);
  same("vocabulary size", found.vocab, expected.vocab);
  same("stage cut (--layers-per-stage)", found.stage_cut, expected.stage_cut);
  same("world size (--ranks)", found.world_size, expected.world_size);
  same("--experts", found.experts, expected.experts);
  same("--ep", found.expert_parallel, expected.expert_parallel);
}

void prune_checkpoints(const std::string& dir, int keep) {
  if (keep <= 0) return;
  int complete = 0;
  for (const auto& [step, path] : step_directories(dir)) {
    const bool has_manifest = fs::exists(path / kManifestName);
    if (has_manifest && ++complete <= keep) continue;
    if (!has_manifest && complete == 0) continue;  // newer than every complete one: maybe being written
    std::error_code error;
    fs::remove_all(path, error);
  }
}

}  // namespace dualpipe::train
