// Reading where a worker stands from each launcher's variables, against the launchers' documented contracts:
// torchrun's worker environment (torch.distributed.run: RANK, LOCAL_RANK, GROUP_RANK, ROLE_RANK, LOCAL_WORLD_SIZE,
// WORLD_SIZE, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,
// TORCHELASTIC_RUN_ID, ...), srun's output environment (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
// SLURM_TASKS_PER_NODE, SLURM_JOB_NODELIST) and Open MPI's (OMPI_COMM_WORLD_*); MPICH's PMI_RANK/PMI_SIZE.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "dualpipe/comm/launch_environment.h"
#include "dualpipe/comm/network_interface.h"
#include "dualpipe/util/error.h"

namespace {

using namespace dualpipe::comm;
using Environment = std::map<std::string, std::string>;

LaunchEnvironment read(const Environment& env) {
  return read_launch_environment([&env](const char* name) -> const char* {
    const auto found = env.find(name);
    return found == env.end() ? nullptr : found->second.c_str();
  });
}

std::string error_of(const Environment& env) {
  try {
    read(env);
  } catch (const dualpipe::InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

// Where a launcher's variables place a worker: the fields every launcher's reading must fill in.
struct WorkerPlace {
  std::string launcher;
  int rank, world_size, local_rank, local_world_size;
  std::string master_addr;
  int master_port;
};

void expect_worker_place(const LaunchEnvironment& e, const WorkerPlace& expected) {
  EXPECT_EQ(e.launcher, expected.launcher);
  EXPECT_EQ(e.rank, expected.rank);
  EXPECT_EQ(e.world_size, expected.world_size);
  EXPECT_EQ(e.local_rank, expected.local_rank);
  EXPECT_EQ(e.local_world_size, expected.local_world_size);
  EXPECT_EQ(e.master_addr, expected.master_addr);
  EXPECT_EQ(e.master_port, expected.master_port);
}

// What torchrun 1.13 gives local rank 1 of node 1 in `torchrun --nnodes 2 --nproc-per-node 2` (static rendezvous).
const Environment kTorchrun = {
    {"RANK", "3"}, {"LOCAL_RANK", "1"}, {"GROUP_RANK", "1"}, {"ROLE_RANK", "3"}, {"ROLE_NAME", "default"},
    {"LOCAL_WORLD_SIZE", "2"}, {"WORLD_SIZE", "4"}, {"GROUP_WORLD_SIZE", "2"}, {"ROLE_WORLD_SIZE", "4"},
    {"MASTER_ADDR", "node0.cluster"}, {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RESTART_COUNT", "2"},
    {"TORCHELASTIC_MAX_RESTARTS", "3"}, {"TORCHELASTIC_RUN_ID", "none"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
    {"TORCHELASTIC_ERROR_FILE", "/tmp/x/error.json"}, {"OMP_NUM_THREADS", "1"}, {"NCCL_ASYNC_ERROR_HANDLING", "1"}};

TEST(LaunchEnvironment, TorchrunsWorkerEnvironment) {
  const LaunchEnvironment e = read(kTorchrun);
  expect_worker_place(e, {"torchrun", 3, 4, 1, 2, "node0.cluster", 29500});
  EXPECT_TRUE(e.store_hosted_by_agent);
  EXPECT_EQ(e.restart_count, 2);
}

TEST(LaunchEnvironment, ByHandOnlyTheFourVariablesAreNeeded) {
  const LaunchEnvironment e = read({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.local_rank, 1);  // one machine: the local rank is the rank
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_FALSE(e.store_hosted_by_agent);
  EXPECT_EQ(e.restart_count, 0);
}

// srun -N 3 --ntasks-per-node 2 on node[07-09]: task 3 is local task 1 of the second node.
const Environment kSlurm = {{"SLURM_PROCID", "3"},  {"SLURM_NTASKS", "6"},     {"SLURM_LOCALID", "1"},
                            {"SLURM_NODEID", "1"},  {"SLURM_TASKS_PER_NODE", "2(x3)"},
                            {"SLURM_JOB_NODELIST", "node[07-09]"}, {"SLURM_JOB_ID", "123456"},
                            {"SLURM_NNODES", "3"}};

TEST(LaunchEnvironment, SlurmTasksFindTheFirstNodeOfTheJob) {
  // The port is per job, so that jobs sharing a node differ.
  expect_worker_place(read(kSlurm), {"slurm", 3, 6, 1, 2, "node07", 20000 + 123456 % 20000});
  Environment uneven = kSlurm;
  uneven["SLURM_TASKS_PER_NODE"] = "3,2(x2)";  // node 1 has 2 tasks
  uneven["MASTER_ADDR"] = "login";
  uneven["MASTER_PORT"] = "4000";
  const LaunchEnvironment u = read(uneven);
  EXPECT_EQ(u.local_world_size, 2);
  EXPECT_EQ(u.master_addr, "login");
  EXPECT_EQ(u.master_port, 4000);
}

TEST(LaunchEnvironment, OpenMpiAndMpichRanksNeedAMasterAddress) {
  const Environment ompi = {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                            {"MASTER_ADDR", "host-a"}};
  expect_worker_place(read(ompi), {"mpi", 2, 4, 0, 2, "host-a", 29500});
  Environment no_master = ompi;
  no_master.erase("MASTER_ADDR");
  EXPECT_NE(error_of(no_master).find("MASTER_ADDR is not set (MPI has no master address: pass the host of rank 0 "
                                     "with mpirun -x MASTER_ADDR=host)"),
            std::string::npos)
      << error_of(no_master);
  const LaunchEnvironment mpich = read({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MASTER_ADDR", "h"}});
  EXPECT_EQ(mpich.rank, 1);
  EXPECT_EQ(mpich.world_size, 2);
}

TEST(LaunchEnvironment, TorchrunStyleVariablesWinOverTheSchedulersOwn) {
  // srun starting torchrun-style workers (or dualpipe launch): RANK is the job's rank, SLURM_PROCID the launcher's.
  Environment both = kSlurm;
  for (const auto& [name, value] : kTorchrun) both[name] = value;
  EXPECT_EQ(read(both).launcher, "torchrun");
  EXPECT_EQ(read(both).rank, 3);
  Environment slurm_and_mpi = kSlurm;
  slurm_and_mpi["OMPI_COMM_WORLD_RANK"] = "5";
  EXPECT_EQ(read(slurm_and_mpi).launcher, "slurm");
}

TEST(LaunchEnvironment, BadValuesAreNamedWithTheRule) {
  EXPECT_NE(error_of({}).find("no launcher's environment found"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})
                .find("environment variable RANK='4' is not an integer from 0 to 3"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}})
                .find("environment variable MASTER_PORT='70000' is not an integer from 1 to 65535"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}).find("MASTER_ADDR is not set"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}).find("MASTER_PORT is not set"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})
                .find("RANK='x' is not an integer"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"},
                      {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})
                .find("LOCAL_RANK=2 must be below LOCAL_WORLD_SIZE=2"),
            std::string::npos);
  Environment slurm = kSlurm;
  slurm.erase("SLURM_JOB_NODELIST");
  EXPECT_NE(error_of(slurm).find("srun sets SLURM_JOB_NODELIST, whose first host runs rank 0; or export MASTER_ADDR"),
            std::string::npos);
}

TEST(LaunchEnvironment, FirstHostOfASlurmNodeList) {
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("node[07-09,12],gpu1"), "node07");
  EXPECT_EQ(first_slurm_host("x-[001-4]"), "x-001");
  EXPECT_EQ(first_slurm_host("rack[2,4]-node[10-11]"), "rack2-node10");
  EXPECT_EQ(first_slurm_host("gpu[3]"), "gpu3");
  EXPECT_THROW(first_slurm_host(""), dualpipe::InvalidArgument);
  EXPECT_THROW(first_slurm_host("node[1-2"), dualpipe::InvalidArgument);
  EXPECT_THROW(first_slurm_host("node1-2]"), dualpipe::InvalidArgument);
}

TEST(NetworkInterface, TheInterfaceThatRoutesToAnAddress) {
  EXPECT_EQ(interface_routing_to("127.0.0.1"), "lo");
  EXPECT_EQ(interface_routing_to("no-such-host.invalid"), "");
}

}  // namespace
