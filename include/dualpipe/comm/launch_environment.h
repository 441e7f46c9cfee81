// Where a worker process stands in a job, whichever launcher started it. Each launcher has its own contract:
//   torchrun (and `dualpipe launch`, and a start by hand): RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK,
//       LOCAL_WORLD_SIZE, plus variables read here only when they matter (TORCHELASTIC_RESTART_COUNT,
//       TORCHELASTIC_USE_AGENT_STORE) or not at all (GROUP_RANK, ROLE_RANK, ROLE_NAME, GROUP_WORLD_SIZE,
//       ROLE_WORLD_SIZE, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID, OMP_NUM_THREADS, ...);
//   SLURM's srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_TASKS_PER_NODE and the job's
//       node list, whose first host runs rank 0;
//   Open MPI's mpirun: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE (MPICH and Intel MPI: PMI_RANK,
//       PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS); MPI says nothing of a master, so MASTER_ADDR must be passed
//       (mpirun -x MASTER_ADDR=host).
// The first contract found in that order wins: srun or mpirun starting torchrun-style workers set RANK too.
// No LibTorch.
#pragma once

#include <functional>
#include <string>

namespace dualpipe::comm {

struct LaunchEnvironment {
  std::string launcher;  // "torchrun", "slurm" or "mpi": whose variables were read
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;  // host of rank 0's rendezvous store
  int master_port = 29500;
  // torchrun with its default static rendezvous hosts the store itself (TORCHELASTIC_USE_AGENT_STORE=True): rank 0
  // then joins it as a client, under a prefix per restart, as torch.distributed does.
  bool store_hosted_by_agent = false;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: 0 for the first attempt
};

// A variable's value, or nullptr when it is unset. The default reads the process environment.
using EnvironmentLookup = std::function<const char*(const char*)>;

// Throws InvalidArgument naming the variable, its value and the rule when a value is missing or invalid, and
// listing the contracts when no launcher's variables are set at all.
LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup = {});

// The first host of a SLURM host list: "node[07-09,12],gpu1" -> "node07", "a,b" -> "a", "x-[001-4]" -> "x-001".
// Throws InvalidArgument for an empty list or unbalanced brackets.
std::string first_slurm_host(const std::string& nodelist);

}  // namespace dualpipe::comm
