#include "kineto_profile.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "dualpipe/schedule/text_format.h"
#include "dualpipe/util/atomic_file.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {

namespace fs = std::filesystem;
namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

void check_kineto_trace_dir(const std::string& dir, int steps, int profiled_steps) {
  DUALPIPE_REQUIRE(profiled_steps >= 1 && profiled_steps <= 1000, "--kineto-steps must be 1 to 1000, got ",
                   profiled_steps);
  if (dir.empty()) return;
  DUALPIPE_REQUIRE(steps >= 2, "--kineto-trace profiles the steps after step 1 (checked against a single-process "
                   "run): give --steps 2 or more, got ", steps);
  std::error_code error;
  if (!fs::is_directory(dir, error)) return;  // made once every option passed (output_dirs.h)
  for (const auto& entry : fs::directory_iterator(dir))
    DUALPIPE_REQUIRE(entry.path().extension() != ".json", "--kineto-trace '", dir, "' already holds ",
                     entry.path().filename().string(), ": give a new or empty directory (a plan would read two "
                     "runs as one)");
}

namespace {

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

// The cores this process may run on (its affinity, as taskset or a container's cpuset limits it).
int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

struct KinetoProfile::State {
  std::string path;
  // Top-level keys added to the trace: the run, as `plan --from-kineto` reads it, and torch.profiler's own record
  // of the job (distributedInfo), which `dualpipe profile` orders ranks by. (LibTorch exports no declared way to
  // add metadata from C++: the keys go into the saved file.)
  std::string metadata;
  int first = 2, last = 2;
  bool running = false, saved = false;
};

KinetoProfile::KinetoProfile(const TrainConfig& c, const Schedule& schedule, int world_rank, int world_size,
                             int first) {
  if (c.outputs.kineto_trace.empty()) return;
  state_ = std::make_unique<State>();
  state_->first = std::max(first, 2);
  state_->last = state_->first + c.outputs.kineto_steps - 1;
  state_->path = (fs::path(c.outputs.kineto_trace) / ("rank" + std::to_string(world_rank) + ".pt.trace.json")).string();
  nlohmann::json the_run = {{"kind", schedule.kind}, {"schedule", format_text(schedule)}};
  // Ranks computing on the CPU (not an emulated device, which sleeps) share its cores with the other ranks of their
  // host: the plan reads how many there were, to take each action's time as it would have run alone.
  if (c.device.kind == run::DeviceKind::Cpu && c.device.emulate.empty())
    the_run["host"] = host_name(), the_run["host_cores"] = usable_cores();
  const nlohmann::json keys = {
      {"dualpipe", the_run},
      {"distributedInfo", {{"backend", "gloo"}, {"rank", world_rank}, {"world_size", world_size}}}};
  const std::string text = keys.dump();
  state_->metadata = text.substr(1, text.size() - 2);  // the keys without their braces
}

KinetoProfile::KinetoProfile() = default;

KinetoProfile::~KinetoProfile() {
  if (state_ && state_->running) profiler::disableProfiler();  // a failed run leaves no profiler behind
}
KinetoProfile::KinetoProfile(KinetoProfile&&) noexcept = default;
KinetoProfile& KinetoProfile::operator=(KinetoProfile&&) noexcept = default;

std::shared_ptr<void> KinetoProfile::step(int number) {
  if (!state_ || number < state_->first) return nullptr;
  if (number > state_->last) {
    save();
    return nullptr;
  }
  if (!state_->running) {
    std::set<ActivityType> activities = {ActivityType::CPU};
    if (torch::cuda::is_available()) activities.insert(ActivityType::CUDA);
    torch::profiler::impl::ExperimentalConfig experimental;
    experimental.profile_all_threads = true;  // an overlapped pair's halves run on threads of their own
    const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO, false, false,
                                                       false, false, false, experimental);
    profiler::prepareProfiler(config, activities);
    profiler::enableProfiler(config, activities);
    state_->running = true;
  }
  return region(("ProfilerStep#" + std::to_string(number)).c_str());
}

std::shared_ptr<void> KinetoProfile::region(const char* name) {
  if (!state_ || !state_->running) return nullptr;
  auto region = std::make_shared<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (region->isActive()) region->before(name);
  return region;
}

namespace {

// Whether the file ends with a '}' (whitespace after it aside): LibTorch's save reports no write error, so a full
// disk shows only as a file cut short.
bool ends_a_json_object(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const std::streamoff size = in.tellg();
  const std::streamoff tail = std::min<std::streamoff>(size, 64);
  std::string end(static_cast<size_t>(tail), '\0');
  in.seekg(size - tail);
  if (!in.read(end.data(), tail)) return false;
  const size_t last = end.find_last_not_of(" \t\r\n");
  return last != std::string::npos && end[last] == '}';
}

}  // namespace

std::string KinetoProfile::save() {
  if (!state_ || !(state_->running || state_->saved)) return {};
  if (state_->saved) return state_->path;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  state_->running = false;
  const std::string saved = state_->path + ".partial";
  // Whatever happens, neither the profiler's file nor its own temporary one (<file>.tmp) stays behind.
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() {
      std::error_code ignored;
      fs::remove(path, ignored);
      fs::remove(path + ".tmp", ignored);
    }
  } cleanup{saved};
  result->save(saved);
  // The keys go in after the profiler's opening brace; the rest is copied as it is, not held in memory.
  std::ifstream in(saved, std::ios::binary);
  if (!ends_a_json_object(saved) || !in.ignore(std::numeric_limits<std::streamsize>::max(), '{') || !in.good())
    throw Error("cannot write the profiler trace '" + state_->path + "': the profiler's file was cut short or not "
                "written (is the disk full?)");
  write_file_atomically(state_->path,
                        [&](std::ostream& out) { out << "{\n  " << state_->metadata << "," << in.rdbuf(); });
  state_->saved = true;
  return state_->path;
}

}  // namespace dualpipe::train
