// `dualpipe train --worker` started the way other launchers start workers, each with only its own variables
// (comm/launch_environment.h): srun's, Open MPI mpirun's, and torchrun's whole set after a restart, its agent
// hosting the rendezvous store with an earlier attempt's keys. The real torchrun of PyTorch 2 runs in
// test_torchrun.cpp and test_two_nodes.cpp. Every run must pass the trainer's own check of step 1 against a
// single-process run.
#include <gtest/gtest.h>

#include <string>

#include "cli/free_port.h"
#include "cli/train_fixture.h"

namespace {

using namespace dualpipe::test;

// Two ranks, with whatever the test's own environment has of the launch variables removed.
const std::string kClean = "env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u LOCAL_RANK ";
const std::string kWorkerJob = kSmall + "--worker --schedule 1f1b --ranks 2 --steps 1 --timeout 20 ";

std::string worker(const std::string& env) {
  return kClean + env + " timeout -k 5 60 " + std::string(DUALPIPE_BIN) + " " + kWorkerJob;
}

void expect_both_trained(const CommandResult& run) {
  EXPECT_TRUE(contains(run.out, "status0=0 status1=0")) << run.out;
  EXPECT_TRUE(contains(run.out, "step matches the single-process reference")) << run.out;
}

std::string both(const std::string& rank0, const std::string& rank1) {
  return "(" + rank0 + " & p0=$!; " + rank1 + "; s1=$?; wait $p0; echo status0=$? status1=$s1)";
}

TEST_F(Train, WorkersStartedBySrunFindRankZeroOnTheFirstNodeOfTheJob) {
  // srun -n 2 on one node: the port comes from the job id (20000 + id mod 20000, so the id of a free port below
  // 40000 is the port itself), the master from the node list.
  const std::string job_id = a_free_port(1);
  const std::string slurm = "SLURM_NTASKS=2 SLURM_NODEID=0 SLURM_TASKS_PER_NODE=2 SLURM_JOB_NODELIST=localhost "
                            "SLURM_JOB_ID=" + job_id;
  const CommandResult run = run_command(both(worker(slurm + " SLURM_PROCID=0 SLURM_LOCALID=0"),
                                             worker(slurm + " SLURM_PROCID=1 SLURM_LOCALID=1")));
  expect_both_trained(run);
}

TEST_F(Train, WorkersStartedByMpirunUseTheMasterAddressPassedWithX) {
  const std::string mpi = "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          a_free_port(2);
  const CommandResult run =
      run_command(both(worker(mpi + " OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=0"),
                       worker(mpi + " OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1")));
  expect_both_trained(run);
}

#ifdef DUALPIPE_STORE_HOST
TEST_F(Train, WorkersStartedByTorchrunJoinTheStoreItsAgentHosts) {
  // torchrun --nproc-per-node 2 after one restart: every variable it sets, and the agent's store on MASTER_PORT,
  // which holds the claims of the earlier attempt (runtime_store_host) that this attempt must not see.
  const std::string port = a_free_port(3);
  const std::string torchrun =
      "LOCAL_WORLD_SIZE=2 WORLD_SIZE=2 GROUP_RANK=0 GROUP_WORLD_SIZE=1 ROLE_NAME=default ROLE_WORLD_SIZE=2 "
      "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " TORCHELASTIC_RESTART_COUNT=1 TORCHELASTIC_MAX_RESTARTS=3 "
      "TORCHELASTIC_RUN_ID=none TORCHELASTIC_USE_AGENT_STORE=True OMP_NUM_THREADS=1";
  const std::string agent = std::string(DUALPIPE_STORE_HOST) + " " + port + " 2 60";
  const CommandResult run = run_command(
      "(" + agent + " > /dev/null & agent=$!; sleep 1; " +
      both(worker(torchrun + " RANK=0 LOCAL_RANK=0 ROLE_RANK=0"), worker(torchrun + " RANK=1 LOCAL_RANK=1 ROLE_RANK=1")) +
      "; kill $agent)");
  expect_both_trained(run);
}
#endif

}  // namespace
