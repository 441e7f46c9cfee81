// Reading a launcher's environment (see launch_environment.h).
#include "dualpipe/comm/launch_environment.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "dualpipe/util/error.h"

namespace dualpipe::comm {
namespace {

class Variables {
 public:
  explicit Variables(const EnvironmentLookup& lookup) : lookup_(lookup) {}

  const char* get(const char* name) const {
    const char* value = lookup_ ? lookup_(name) : std::getenv(name);
    return value != nullptr && *value != '\0' ? value : nullptr;
  }
  bool has(const char* name) const { return get(name) != nullptr; }
  // The first of `names` that is set, or nullptr.
  const char* first(std::initializer_list<const char*> names, const char** which = nullptr) const {
    for (const char* name : names) {
      if (has(name)) {
        if (which) *which = name;
        return get(name);
      }
    }
    return nullptr;
  }

  int integer(const char* name, long low, long high, const char* what) const {
    const char* value = get(name);
    DUALPIPE_REQUIRE(value != nullptr, "environment variable ", name, " is not set (", what, ")");
    return parse(name, value, low, high);
  }
  int integer_or(const char* name, int fallback, long low, long high) const {
    const char* value = get(name);
    return value ? parse(name, value, low, high) : fallback;
  }

  static int parse(const char* name, const char* value, long low, long high) {
    char* end = nullptr;
    const long parsed = std::strtol(value, &end, 10);
    DUALPIPE_REQUIRE(end != value && *end == '\0' && parsed >= low && parsed <= high, "environment variable ", name,
                     "='", value, "' is not an integer from ", low, " to ", high);
    return static_cast<int>(parsed);
  }

 private:
  const EnvironmentLookup& lookup_;
};

constexpr long kMaxInt = std::numeric_limits<int>::max();

void read_master(const Variables& v, LaunchEnvironment& e, const char* how_to_set) {
  const char* address = v.get("MASTER_ADDR");
  DUALPIPE_REQUIRE(address != nullptr || !e.master_addr.empty(), "environment variable MASTER_ADDR is not set (",
                   how_to_set, ")");
  if (address) e.master_addr = address;
  e.master_port = v.integer_or("MASTER_PORT", e.master_port, 1, 65535);
}

void check_local(const LaunchEnvironment& e, const char* rank_name, const char* size_name) {
  DUALPIPE_REQUIRE(e.local_rank < e.local_world_size, "environment variable ", rank_name, "=", e.local_rank,
                   " must be below ", size_name, "=", e.local_world_size);
}

// SLURM_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of 3 nodes, then 1) for node `node`; 0 when it cannot tell.
int slurm_tasks_on_node(const char* tasks_per_node, int node) {
  if (!tasks_per_node) return 0;
  const std::string text = tasks_per_node;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find(',', at);
    const std::string item = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    int tasks = 0, repeat = 1;
    if (std::sscanf(item.c_str(), "%d(x%d)", &tasks, &repeat) < 1 || tasks < 1 || repeat < 1) return 0;
    if (node < repeat) return tasks;
    node -= repeat;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return 0;
}

LaunchEnvironment read_torchrun(const Variables& v) {
  LaunchEnvironment e;
  e.launcher = "torchrun";
  const char* what = "torchrun, dualpipe launch and a start by hand set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT";
  e.world_size = v.integer("WORLD_SIZE", 1, kMaxInt, what);
  e.rank = v.integer("RANK", 0, e.world_size - 1, what);
  DUALPIPE_REQUIRE(v.has("MASTER_PORT"), "environment variable MASTER_PORT is not set (", what, ")");
  read_master(v, e, what);
  e.local_world_size = v.integer_or("LOCAL_WORLD_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = v.integer_or("LOCAL_RANK", e.local_world_size == e.world_size ? e.rank : 0, 0, e.world_size - 1);
  check_local(e, "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  const char* agent_store = v.get("TORCHELASTIC_USE_AGENT_STORE");
  e.store_hosted_by_agent = agent_store != nullptr && std::string(agent_store) == "True";
  e.restart_count = v.integer_or("TORCHELASTIC_RESTART_COUNT", 0, 0, kMaxInt);
  return e;
}

LaunchEnvironment read_slurm(const Variables& v) {
  LaunchEnvironment e;
  e.launcher = "slurm";
  const char* what = "srun sets it for every task";
  const char* tasks_name = "SLURM_NTASKS";
  v.first({"SLURM_NTASKS", "SLURM_NPROCS"}, &tasks_name);
  e.world_size = v.integer(tasks_name, 1, kMaxInt, what);
  e.rank = v.integer("SLURM_PROCID", 0, e.world_size - 1, what);
  e.local_rank = v.integer_or("SLURM_LOCALID", 0, 0, e.world_size - 1);
  const int per_node = slurm_tasks_on_node(v.get("SLURM_TASKS_PER_NODE"), v.integer_or("SLURM_NODEID", 0, 0, kMaxInt));
  e.local_world_size = per_node > 0 ? per_node : v.integer_or("SLURM_NTASKS_PER_NODE", e.local_rank + 1, 1, kMaxInt);
  check_local(e, "SLURM_LOCALID", "the tasks on this node (SLURM_TASKS_PER_NODE)");
  const char* list_name = nullptr;
  if (const char* nodes = v.first({"SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_STEP_NODELIST"}, &list_name))
    e.master_addr = first_slurm_host(nodes);
  // Jobs sharing a node must not share a port: derived from the job id unless MASTER_PORT says otherwise.
  e.master_port = 20000 + v.integer_or("SLURM_JOB_ID", 9500, 0, kMaxInt) % 20000;
  read_master(v, e, "srun sets SLURM_JOB_NODELIST, whose first host runs rank 0; or export MASTER_ADDR");
  return e;
}

LaunchEnvironment read_mpi(const Variables& v) {
  LaunchEnvironment e;
  e.launcher = "mpi";
  const bool open_mpi = v.has("OMPI_COMM_WORLD_RANK");
  const char* size = open_mpi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE";
  const char* local_rank = open_mpi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "MPI_LOCALRANKID";
  const char* local_size = open_mpi ? "OMPI_COMM_WORLD_LOCAL_SIZE" : "MPI_LOCALNRANKS";
  const char* what = open_mpi ? "Open MPI's mpirun sets it" : "MPICH's mpiexec sets it";
  e.world_size = v.integer(size, 1, kMaxInt, what);
  e.rank = v.integer(open_mpi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK", 0, e.world_size - 1, what);
  e.local_world_size = v.integer_or(local_size, 1, 1, e.world_size);
  e.local_rank = v.integer_or(local_rank, 0, 0, e.world_size - 1);
  check_local(e, local_rank, local_size);
  read_master(v, e, "MPI has no master address: pass the host of rank 0 with mpirun -x MASTER_ADDR=host");
  return e;
}

}  // namespace

LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup) {
  const Variables v(lookup);
  if (v.has("RANK") || v.has("WORLD_SIZE")) return read_torchrun(v);
  if (v.has("SLURM_PROCID")) return read_slurm(v);
  if (v.has("OMPI_COMM_WORLD_RANK") || v.has("PMI_RANK")) return read_mpi(v);
  throw InvalidArgument(
      "no launcher's environment found: start the ranks with dualpipe launch or torchrun (RANK, WORLD_SIZE, "
      "MASTER_ADDR, MASTER_PORT), srun (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST) or mpirun "
      "(OMPI_COMM_WORLD_RANK or PMI_RANK, with -x MASTER_ADDR=host); see docs/launch.md");
}

std::string first_slurm_host(const std::string& nodelist) {
  DUALPIPE_REQUIRE(!nodelist.empty(), "the SLURM node list is empty");
  std::string host;
  bool in_brackets = false, took_first = false;
  for (char c : nodelist) {
    if (!in_brackets && c == ',') break;  // the first host ends at a top-level comma
    if (c == '[') {
      DUALPIPE_REQUIRE(!in_brackets, "SLURM node list '", nodelist, "' has nested brackets");
      in_brackets = true;
      took_first = false;
    } else if (c == ']') {
      DUALPIPE_REQUIRE(in_brackets, "SLURM node list '", nodelist, "' has a ']' without '['");
      in_brackets = false;
    } else if (in_brackets) {
      // The first number of a range list, zero padding as written: "[07-09,12]" gives "07".
      if (c == '-' || c == ',') took_first = true;
      else if (!took_first) host += c;
    } else {
      host += c;
    }
  }
  DUALPIPE_REQUIRE(!in_brackets, "SLURM node list '", nodelist, "' has a '[' without ']'");
  DUALPIPE_REQUIRE(!host.empty(), "SLURM node list '", nodelist, "' names no host");
  return host;
}

}  // namespace dualpipe::comm
